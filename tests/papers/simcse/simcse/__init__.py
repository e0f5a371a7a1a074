from .tool import SimCSE
