"""Shipped predictors, one small file each (docs/policies.md, "Plans").

`get(spec, params)` resolves what `uvmsim plan --predictor` names: a shipped name (a factory
called with the parameters) or 'package.module:object' (a class is instantiated with the
parameters, a function is the predictor itself unless parameters are given, then it is a
factory called with them; any other object is the predictor).
"""
from __future__ import annotations

import importlib
from typing import Any

from ...errors import ConfigError
from .correlation import Correlation, correlation
from .learned import FEATURES, Learned, LogisticModel, learned, train
from .oracle import Oracle, oracle
from .stride import Stride, stride

#: predictors made by name (the learned one needs a trained model: build it in Python)
PREDICTORS = {"oracle": oracle, "correlation": correlation, "stride": stride}


def get(spec: str, params: dict[str, Any] | None = None):
    params = dict(params or {})
    if spec in PREDICTORS:
        factory = PREDICTORS[spec]
    elif ":" in spec:
        mod, _, name = spec.partition(":")
        try:
            factory = getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot load predictor {spec!r}: {e}") from None
        if not isinstance(factory, type) and not params:
            if not callable(factory):
                raise ConfigError(f"{spec!r} is a {type(factory).__name__}, not a predictor")
            return factory
    else:
        raise ConfigError(f"unknown predictor {spec!r}; known: {', '.join(sorted(PREDICTORS))} "
                          "(or 'package.module:object')")
    try:
        return factory(**params)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"predictor {spec!r}: {e}") from None


__all__ = ["FEATURES", "Correlation", "Learned", "LogisticModel", "Oracle", "PREDICTORS", "Stride",
           "correlation", "get", "learned", "oracle", "stride", "train"]
