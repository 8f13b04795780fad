"""The bundled example programs (``train_mlp``) and the small CPU trace ``scripts/demo`` uses
without torch: user programs, so they import nothing of the package.
"""
