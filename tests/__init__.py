"""The test tree is a package so that pytest puts the repository root on
``sys.path``, not ``tests/``: otherwise a test folder such as ``tests/ray``
would be imported as the package of the same name when that package is not
installed (see tests/core/test_test_tree.py)."""
