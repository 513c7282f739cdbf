"""Numba kernels. No pandas, no booster imports: arrays in, arrays out."""
