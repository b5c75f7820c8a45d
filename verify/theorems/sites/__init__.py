"""The native hot paths' arithmetic, copied verbatim from the source, one ``Site`` each.

``managers.py`` defines ``Site`` and the managers' and pool's sites; ``coordinator.py`` the
coordinator's; ``hot_paths.SITES`` joins them.
"""
