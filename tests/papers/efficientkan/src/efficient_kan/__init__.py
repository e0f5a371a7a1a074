from .kan import KANLinear, KAN

__all__ = ["KANLinear", "KAN"]
