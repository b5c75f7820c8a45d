# Stub-only additions for nanobind_add_stub (CMakeLists.txt).

# The stub generator skips __version__ (livetail/__init__.py re-exports it); `typing` is for
# the constructors below.
(^|\.)_core\.__prefix__$:
    import typing

    __version__: str

# A match is made by Coordinator.match_prefix and a manager by its subclass: neither has a
# public constructor, so no constructor call may type-check either.
\.PrefixMatch\.__prefix__$:
    def __init__(self, _never: typing.NoReturn, /) -> None: ...

\.Manager\.__prefix__$:
    def __init__(self, _never: typing.NoReturn, /) -> None: ...

# Plans are made by the coordinator (plan_offload, claim) only.
\.OffloadPlan\.__prefix__$:
    def __init__(self, _never: typing.NoReturn, /) -> None: ...

\.LoadPlan\.__prefix__$:
    def __init__(self, _never: typing.NoReturn, /) -> None: ...

# A detached handle is made by Coordinator.detach only.
\.DetachedTables\.__prefix__$:
    def __init__(self, _never: typing.NoReturn, /) -> None: ...
