"""Records: the engine's results as dicts whose keys are also attributes."""


class Record(dict):
    """A result: a dict whose keys are also attributes (``r.text == r["text"]``)."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no field {name!r}") from None

    def __dir__(self):
        return sorted(set(dir(dict)) | set(self.keys()))

    def __repr__(self):
        return f"Record({dict.__repr__(self)})"
