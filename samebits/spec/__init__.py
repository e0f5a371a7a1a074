"""Environment specs: the model, reading (extends chains), validating, writing, drafting; the GPU
generations."""
