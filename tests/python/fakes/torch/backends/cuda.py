"""torch.backends.cuda: the cuFFT plan cache of each device
(cufft_plan_cache[i].size, .max_size, .clear())."""
import simcuda

PLAN_BYTES = 2 << 20


class _PlanCache:
    def __init__(self, device):
        self.device = device
        self._plans = {}
        self.max_size = 4096

    @property
    def size(self):
        return len(self._plans)

    def _add(self, key):
        if key not in self._plans:
            self._plans[key] = simcuda.alloc(self.device, PLAN_BYTES)

    def clear(self):
        while self._plans:
            simcuda.free(self._plans.popitem()[1])


class _PlanCacheManager:
    def __init__(self):
        self._caches = {}

    def __getitem__(self, device):
        d = int(device)
        if d not in self._caches:
            self._caches[d] = _PlanCache(d)
        return self._caches[d]


cufft_plan_cache = _PlanCacheManager()
