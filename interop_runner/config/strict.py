"""The base of the config's file models: unknown keys refused, frozen, no infinities."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A model of a user's file: an unknown key is an error (with a did-you-mean), a model is
    frozen once validated, and ``.inf``/``.nan`` are refused where a number goes."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # .inf: no
