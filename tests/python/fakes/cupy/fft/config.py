from ._cache import get_plan_cache  # noqa: F401
