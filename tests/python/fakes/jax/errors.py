"""jax.errors: JaxRuntimeError, what the runtime raises, an out-of-memory
included ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate N
bytes."). Real JAX gives it from jaxlib (XlaRuntimeError in older
versions): a RuntimeError subclass."""


class JaxRuntimeError(RuntimeError):
    pass
