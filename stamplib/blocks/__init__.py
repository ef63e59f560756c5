"""Building blocks shared by the TTA methods: entropy, SAM, BatchNorm configuration,
memories and batched view augmentations. Nothing here knows about datasets or files."""
