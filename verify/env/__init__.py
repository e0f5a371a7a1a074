"""verify env: an installed environment's files, libraries, bytecode and interpreter against its
lock."""
