"""Where a model lives: local checkpoints (safetensors, GGUF) and the Hugging Face Hub.

Headers only, never tensor data. `stored.StoredTensor` is one tensor as a file stores it."""
