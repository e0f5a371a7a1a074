"""samebits: reproducible GPU environments as declared, locked, verifiable artifacts."""

__version__ = "0.1.0"
