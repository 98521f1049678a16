"""The version of ccbench, recorded in every run and file it writes (the package's single source)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
