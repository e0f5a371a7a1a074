"""samebits verify node: one host's gate (verify.node.cmd_node)."""
