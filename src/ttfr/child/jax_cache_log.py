"""--explain's diagnostic process, JAX: what the runtime says of its caches in the first call, kept verbatim
(the parent redacts it like every recorded text). Imported only by that process."""

import logging


class CacheLog(logging.Handler):
    """JAX's `jax_explain_cache_misses` messages (logged as warnings by jax._src's loggers) during the first call:
    each tracing cache miss with why, each persistent-cache miss, hit and write or skip with why."""

    MOST, CHARACTERS = 40, 2000
    SAID = ("TRACING CACHE MISS", "PERSISTENT COMPILATION CACHE", "Writing ", "Not writing", "Persistent compilation cache hit")

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.listening = False

    @classmethod
    def start_for(cls, jax):
        """The log, listening on JAX's loggers once asked (None: this JAX has no jax_explain_cache_misses)."""
        try:
            jax.config.update("jax_explain_cache_misses", True)
        except Exception:  # noqa: BLE001 - another JAX than this was written for: no words from it
            return None
        log = cls()
        logging.getLogger("jax").addHandler(log)
        return log

    def start(self):
        self.listening = True

    def stop(self):
        self.listening = False
        logging.getLogger("jax").removeHandler(self)

    def emit(self, record):
        try:
            text = record.getMessage()
        except Exception:  # a record that cannot format itself says nothing here
            return
        if self.listening and len(self.messages) < self.MOST and text.startswith(self.SAID):
            self.messages.append(text[: self.CHARACTERS])
