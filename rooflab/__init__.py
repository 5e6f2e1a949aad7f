"""Roofline Lab's measuring and reporting library (the kernels live in `kernels`)."""
