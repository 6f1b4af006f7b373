"""The one exception the domain raises for malformed values."""


class DomainError(ValueError):
    """A value that cannot exist in the domain: NaN price, crossed quote, naive timestamp, ..."""
