"""`rblock bench`: rblock against eager PyTorch, torch.compile and Liger, in GB/s next to the copy bandwidth."""
