"""Unregistered Python objects: pickled only with allow_unsafe_pickle=True, else refused with
UnsupportedPayloadError naming the type."""

import asyncio
import collections
import enum

import pytest

from wireless_comm import CommConfig, CommOptions, UnsupportedPayloadError
from helpers import make_pair, run


class Opaque:
    def __init__(self, payload):
        self.payload = payload

    def __eq__(self, other):
        return type(other) is Opaque and other.payload == self.payload


class Color(enum.IntEnum):
    RED = 1


def test_unregistered_object_is_refused_by_default():
    async def body():
        a, b = await make_pair()
        with pytest.raises(UnsupportedPayloadError, match=r"test_pickle\.Opaque") as info:
            await a.send({"x": [Opaque(1)]}, a.peer("node-b"))
        assert "allow_unsafe_pickle=True" in str(info.value)
        with pytest.raises(UnsupportedPayloadError, match="set"):
            await a.send({1, 2}, a.peer("node-b"))
        with pytest.raises(UnsupportedPayloadError, match="Opaque"):
            await a.send("ok", a.peer("node-b"), piggypayload={"meta": Opaque(2)})
        assert a.stats()["messages_sent"] == 0
        await a.close()
        await b.close()
    run(body())


def test_subclasses_of_builtins_travel_as_their_base_type():
    async def body():
        a, b = await make_pair()
        Pair = collections.namedtuple("Pair", "x y")
        await a.send([Color.RED, collections.OrderedDict(k=1), Pair(1, 2)], a.peer("node-b"))
        got, _ = await b.recv(b.peer("node-a"))
        assert got == [1, {"k": 1}, (1, 2)] and type(got[2]) is tuple
        await a.close()
        await b.close()
    run(body())


def test_unsafe_pickle_round_trips_when_both_ends_allow_it():
    async def body():
        unsafe = CommConfig(allow_unsafe_pickle=True)
        a, b = await make_pair(unsafe, unsafe)
        value = {"obj": Opaque([1, 2, 3]), "set": {1, 2}, "plain": 5}
        await a.send(value, a.peer("node-b"))
        got, _ = await b.recv(b.peer("node-a"))
        assert got == value and type(got["obj"]) is Opaque
        await a.close()
        await b.close()
    run(body())


def test_a_receiver_without_unsafe_pickle_refuses_pickles():
    async def body():
        a, b = await make_pair(CommConfig(allow_unsafe_pickle=True), CommConfig())
        waiting = asyncio.create_task(b.recv(b.peer("node-a"), CommOptions(timeout=10)))
        await asyncio.sleep(0)
        await a.send(Opaque(1), a.peer("node-b"))
        with pytest.raises(UnsupportedPayloadError, match="pickle"):
            await waiting
        await a.close()
        await b.close()
    run(body())
