import simcuda


class _ActiveContext:
    def __enter__(self):
        self.devnum = simcuda.current() if simcuda.initialized() else None
        return self

    def __exit__(self, *exc):
        return False

    def __bool__(self):
        return self.devnum is not None


class Driver:
    def __init__(self):
        self.is_initialized = False

    def _init(self):
        simcuda.lib()
        self.is_initialized = True

    def get_active_context(self):
        return _ActiveContext()


driver = Driver()
