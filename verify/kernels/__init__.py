"""Kernel coverage: the device code an environment carries (fatbins) against the GPUs it must run
on."""
