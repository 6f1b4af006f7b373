"""What every section of the settings is, and the field types several sections share."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

PositiveSeconds = Annotated[float, Field(gt=0)]
Money = Annotated[Decimal, Field(gt=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0, le=1)]
Port = Annotated[int, Field(ge=1, le=65535)]


# A table of settings: unknown keys refused, values frozen, defaults validated too.
class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)
