from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.providers.fake_vendor import FakeVendor, VendorServer


@pytest.fixture
def vendor() -> Iterator[FakeVendor]:
    with VendorServer(FakeVendor()) as running:
        yield running
