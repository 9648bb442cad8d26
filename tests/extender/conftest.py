"""The local HTTP extender server fixture (`server`, defined with the client tests) for every
test module here."""

from tests.extender.test_extender import server

__all__ = ["server"]
