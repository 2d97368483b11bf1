"""`python -m wireless_comm.node`: V0.1's node CLI, a drop-in for V0.1 scripts, with the
sub-commands, flags and output lines of `wcomm node` (apps/cli/node_command.cpp), so either can
stand in for the other on one side of a link.

    python -m wireless_comm.node --config configs/node-b.yaml echo --src node-a --tag 1 --count 1
    python -m wireless_comm.node --config configs/node-a.yaml send --dst node-b --tag 1 \\
        --json '{"message":"hello"}' --metadata '{"trace_id":"wifi-test-1"}' --expect-reply

Output: V0.1's lines by default ("received object={...} piggypayload={...}", tensors as
Tensor(shape=(3, 224, 224), dtype=torch.float32), byte strings as bytes(length=N));
--format wcomm prints wcomm's one-line form (tag, message_id, wire_bytes too).

Exit status, as V0.1: 0 done or stopped by Ctrl-C / SIGTERM, 1 anything failed (the config,
an option's value, the network or the peer), 2 a malformed command line (argparse). Further
Ctrl-Cs while it stops are ignored, so none kills it mid-write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
import sys
from typing import Any, Callable, List, Optional

from . import _core
from .comm import Comm
from .config import CommOptions, Peer, RuntimeConfig, load_runtime_config
from .errors import (
    CommError,
    ConnectionClosedError,
    ConnectionFailedError,
    OperationTimeoutError,
)

# V0.1's exit codes: every failure after the command line parsed is 1; Ctrl-C is a clean stop.
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 0
PROG = "python -m wireless_comm.node"
DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool")
# torch's other names for them, as V0.1 takes the dtype from the torch module.
DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "short": "int16", "int": "int32",
                 "long": "int64"}
FORMATS = ("v0.1", "wcomm")


class UsageError(Exception):
    """A mistake in what the user typed; the message names the option."""


def fail(code: int, message: str) -> int:
    print(f"wireless_comm.node: {message}", file=sys.stderr, flush=True)
    return code


def say(line: str) -> None:
    print(line, flush=True)


# -- payloads (as apps/cli/payload.cpp builds them) ---------------------------------------------


def parse_json_option(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{option}: not valid JSON: {e}") from None


def parse_dtype(option: str, text: str) -> str:
    name = text[len("torch."):] if text.startswith("torch.") else text
    name = DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise UsageError(f"{option}: unknown dtype '{text}'; use one of {' '.join(DTYPES)} "
                         f"(or torch's {' '.join(DTYPE_ALIASES)})")
    return name


def parse_shape(option: str, text: str) -> List[int]:
    if text in ("", "scalar"):
        return []
    shape = []
    for part in text.split(","):
        part = part.strip(" ")
        if not part.isdigit():
            raise UsageError(f"{option}: '{text}' is not a shape; give non-negative integers separated by commas, "
                             "e.g. 3,224,224")
        shape.append(int(part))
    if len(shape) > 64:
        raise UsageError(f"{option}: at most 64 dimensions")
    return shape


def arange_tensor(dtype: str, shape: List[int]) -> Any:
    """V0.1's generated tensor: torch.arange(numel, dtype=dtype).reshape(shape), element i
    holding i in dtype (integers wrap as torch's do). bool, which torch.arange refuses,
    alternates False, True. Without torch, numpy's equivalent (float16 rounds to nearest, as
    `wcomm node` does)."""
    dtype = parse_dtype("--tensor-dtype", dtype)
    n = 1
    for d in shape:
        n *= d
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        if dtype == "bool":
            return (torch.arange(n) % 2 == 1).reshape(shape)
        return torch.arange(n, dtype=getattr(torch, dtype)).reshape(shape)
    import numpy as np

    if dtype == "bfloat16":
        raise UsageError("--tensor-dtype: bfloat16 needs torch (numpy has no bfloat16)")
    if dtype == "bool":
        return (np.arange(n) % 2 == 1).reshape(shape)
    return np.arange(n, dtype=np.int64).astype(dtype).reshape(shape)


def describe(value: Any) -> str:
    """A value as V0.1's node CLI prints it: Python's repr, with tensors as
    Tensor(shape=(3, 224, 224), dtype=torch.float32) and byte strings as bytes(length=N)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"bytes(length={memoryview(value).nbytes})"
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype") and not isinstance(value, (int, float, bool)):
        dtype = str(value.dtype)
        if not dtype.startswith("torch."):
            dtype = "torch." + dtype  # numpy's float32 is torch's float32 on the wire
        return f"Tensor(shape={tuple(int(d) for d in shape)!r}, dtype={dtype})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{describe(k)}: {describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    if isinstance(value, tuple) and type(value) is tuple:
        inner = ", ".join(describe(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)


def build_payload(args: argparse.Namespace) -> Any:
    given = [o for o, v in (("--json", args.json), ("--text", args.text), ("--file", args.file),
                            ("--tensor-shape", args.tensor_shape)) if v is not None]
    if len(given) != 1:
        raise UsageError("send: give exactly one payload: --json, --text, --file or --tensor-shape")
    if args.tensor_dtype is not None and args.tensor_shape is None:
        raise UsageError("--tensor-dtype: only meaningful with --tensor-shape")
    if args.json is not None:
        return parse_json_option("--json", args.json)
    if args.text is not None:
        return args.text
    if args.file is not None:
        try:
            with open(args.file, "rb") as f:
                return f.read()
        except OSError as e:
            raise UsageError(f"--file: cannot open '{args.file}': {e.strerror}") from None
    return arange_tensor(args.tensor_dtype or "float32", parse_shape("--tensor-shape", args.tensor_shape))


# -- running ---------------------------------------------------------------------------------


def known_peers(config: RuntimeConfig) -> str:
    return ", ".join(p.node_id for p in config.peers) or "(none)"


def check_peer(config: RuntimeConfig, option: str, node_id: str) -> None:
    if node_id == config.local.node_id:
        raise UsageError(f"{option}: '{node_id}' is this node itself; name a peer: {known_peers(config)}")
    if not any(p.node_id == node_id for p in config.peers):
        raise UsageError(f"{option}: unknown peer '{node_id}'; {config.local.node_id}'s config knows: "
                         f"{known_peers(config)}")


def comm_failure(what: str, peer: Peer, e: CommError, timeout: Optional[float]) -> int:
    where = f"{peer.node_id} ({peer.host}:{peer.port})"
    if isinstance(e, OperationTimeoutError):
        return fail(EXIT_FAILED, f"{what} {where} timed out after {timeout:g} s: {e}")
    if isinstance(e, ConnectionFailedError):
        return fail(EXIT_FAILED, f"{what} {where} failed: cannot reach it (is it running?): {e}")
    return fail(EXIT_FAILED, f"{what} {where} failed: {type(e).__name__}: {e}")


class Signals:
    """SIGINT and SIGTERM for the whole run. The handler only counts and passes the news on (it
    never raises KeyboardInterrupt), so a second Ctrl-C cannot interrupt a write or the
    shutdown; a wakeup fd that the event loop watches makes a signal taken by one of the C++
    core's threads wake the loop at once."""

    def __init__(self) -> None:
        self.count = 0
        self.on_first: Optional[Callable[[], None]] = None
        self._wakeup: Optional[socket.socket] = None
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handle)

    def ignore_from_now(self) -> None:
        """The run is over: a late Ctrl-C must not end the exit with status -2. (Python puts the
        default handlers back as it finalizes, unless a signal is ignored.)"""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count == 1 and self.on_first is not None:
            self.on_first()

    def attach(self, loop: asyncio.AbstractEventLoop, on_first: Callable[[], None]) -> None:
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        self._wakeup, self._writer = reader, writer
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        loop.add_reader(reader.fileno(), self._drain)  # the Python handler runs once the loop wakes
        self.on_first = lambda: loop.call_soon_threadsafe(on_first)
        if self.count:
            self.on_first()

    def _drain(self) -> None:
        try:
            self._wakeup.recv(4096)
        except (BlockingIOError, InterruptedError):
            pass

    def detach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.on_first = None
        if self._wakeup is not None:
            signal.set_wakeup_fd(-1)
            loop.remove_reader(self._wakeup.fileno())
            self._wakeup.close()
            self._writer.close()
            self._wakeup = None


class Node:
    def __init__(self, comm: Comm, format: str) -> None:
        self.comm = comm
        self.format = format
        self.interrupted = False
        self.wakeup = asyncio.Event()

    def on_signal(self) -> None:
        # Closing the Comm fails the pending send or recv, which wakes the command.
        if self.interrupted:
            return
        self.interrupted = True
        self.wakeup.set()
        asyncio.get_running_loop().create_task(self.comm.close())

    def print_received(self, peer: Peer, tag: int, got: Any) -> None:
        if self.format == "v0.1":
            say(f"received object={describe(got.value)} piggypayload={describe(got.piggypayload)}")
        else:
            say(f"received from {peer.node_id} tag={tag} message_id={got.message_id} wire_bytes={got.wire_bytes} "
                f"value={_core.summarize(got.value)} piggypayload={_core.summarize(got.piggypayload)}")

    async def sleep(self, seconds: float) -> bool:
        """Sleeps unless a signal comes first; True when interrupted."""
        try:
            await asyncio.wait_for(self.wakeup.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        return self.interrupted

    async def send(self, args: argparse.Namespace, payload: Any, metadata: Any) -> int:
        dst = self.comm.peer(args.dst)
        if self.format == "v0.1":
            summary = f"object={describe(payload)} piggypayload={describe(metadata)}"
        else:
            summary = _core.summarize(payload)
        options = CommOptions(tag=args.tag, timeout=args.timeout, wait_for_capacity=not args.fail_fast)
        try:
            sent = await self.comm.send(payload, dst, metadata, options)
            if self.format == "v0.1":
                say(f"sent {summary}")
            else:
                say(f"sent message_id={sent.message_id} wire_bytes={sent.wire_bytes} tag={args.tag} value={summary}")
        except CommError as e:
            if self.interrupted:
                return fail(EXIT_INTERRUPTED, "interrupted")
            return comm_failure("send to", dst, e, args.timeout)
        if not args.expect_reply:
            return EXIT_OK
        try:
            got = await self.comm.recv_message(dst, CommOptions(tag=args.tag, timeout=args.timeout))
            self.print_received(dst, args.tag, got)
        except CommError as e:
            if self.interrupted:
                return fail(EXIT_INTERRUPTED, "interrupted")
            return comm_failure("waiting for the reply from", dst, e, args.timeout)
        return EXIT_OK

    async def serve(self, args: argparse.Namespace, echo: bool) -> int:
        """Receives (and for echo, returns) count messages; count 0 serves until a signal,
        outliving peers that disconnect or misbehave (a note on stderr, then served again)."""
        src = self.comm.peer(args.src)
        forever = args.count == 0
        options = CommOptions(tag=args.tag, timeout=args.timeout)
        backoff = 0.0

        async def on_error(what: str, e: CommError) -> Optional[int]:
            nonlocal backoff
            if self.interrupted:
                return EXIT_OK if forever else EXIT_INTERRUPTED
            if not forever or (isinstance(e, ConnectionClosedError) and self.comm.closed):
                return comm_failure(what, src, e, args.timeout)
            if isinstance(e, OperationTimeoutError):
                return None  # no message yet: keep waiting
            print(f"wireless_comm.node: note: {what} {src.node_id}: {type(e).__name__}: {e}; still serving",
                  file=sys.stderr, flush=True)
            backoff = min(max(backoff * 2, 0.05), 1.0)
            return EXIT_OK if await self.sleep(backoff) else None

        done = 0
        while forever or done < args.count:
            try:
                got = await self.comm.recv_message(src, options)
            except CommError as e:
                code = await on_error("recv from", e)
                if code is not None:
                    return code
                continue
            backoff = 0.0
            self.print_received(src, args.tag, got)
            done += 1
            if not echo:
                continue
            echoed = f"echoed object={describe(got.value)} piggypayload={describe(got.piggypayload)}"
            try:
                sent = await self.comm.send(got.value, src, got.piggypayload, options)
                if self.format == "v0.1":
                    say(echoed)
                else:
                    say(f"echoed to {src.node_id} tag={args.tag} message_id={sent.message_id} "
                        f"wire_bytes={sent.wire_bytes}")
            except CommError as e:
                code = await on_error("echo to", e)
                if code is not None:
                    return code
        return EXIT_OK


async def run(args: argparse.Namespace, signals: Signals) -> int:
    if signals.count:
        return EXIT_INTERRUPTED
    try:
        config = load_runtime_config(args.config)
    except (OSError, ValueError) as e:
        return fail(EXIT_FAILED, f"--config: {e}")
    payload = metadata = None
    try:
        if args.command == "send":
            check_peer(config, "--dst", args.dst)
            payload = build_payload(args)
            if args.metadata is not None:
                metadata = parse_json_option("--metadata", args.metadata)
                if not isinstance(metadata, dict):
                    raise UsageError("--metadata: must be a JSON object, e.g. '{\"trace_id\": \"t1\"}'")
        else:
            check_peer(config, "--src", args.src)
    except UsageError as e:
        return fail(EXIT_FAILED, str(e))

    try:
        comm = await Comm.create(local=config.local, peers=config.peers, bind_host=config.bind_host,
                                 config=config.comm)
    except ValueError as e:
        return fail(EXIT_FAILED, f"--config: {e}")
    except CommError as e:
        return fail(EXIT_FAILED, f"cannot start {config.local.node_id} on {config.bind_host}:"
                                 f"{config.local.port}: {e}")
    node = Node(comm, args.format)
    loop = asyncio.get_running_loop()
    signals.attach(loop, node.on_signal)
    try:
        if args.command == "send":
            return await node.send(args, payload, metadata)
        return await node.serve(args, echo=args.command == "echo")
    finally:
        await comm.close()
        signals.detach(loop)


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def tag_int(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"must be in 0..4294967295, got {text}")
    return value


def count_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (serve until Ctrl-C) or a positive number, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Run a wireless_comm node from a YAML config: send, receive or echo messages.",
        epilog=f"  {PROG} --config node-b.yaml echo --src node-a --tag 1 --count 1\n"
               f"  {PROG} --config node-a.yaml send --dst node-b --tag 1 --json '{{\"message\":\"hello\"}}' \\\n"
               "      --metadata '{\"trace_id\":\"wifi-test-1\"}' --expect-reply",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", help="the node's YAML config (local, peers, comm)")
    ap.add_argument("--format", choices=FORMATS, default=None,
                    help="output lines: v0.1 (default; 'received object=... piggypayload=...', as V0.1 "
                         "prints them) or wcomm (one line with tag, message_id and wire_bytes)")
    sub = ap.add_subparsers(dest="command", metavar="{send,recv,echo}")
    sub.required = True
    # V0.1 takes --config before the sub-command; it (and --format) may come after it too.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--config", dest="config_after", help=argparse.SUPPRESS)
    after.add_argument("--format", dest="format_after", choices=FORMATS, help=argparse.SUPPRESS)

    send = sub.add_parser("send", parents=[after], help="send one message to a peer")
    send.add_argument("--dst", required=True, help="the peer to send to")
    send.add_argument("--json", help="payload: a JSON document (objects become dicts)")
    send.add_argument("--text", help="payload: a string")
    send.add_argument("--file", help="payload: the bytes of a file")
    send.add_argument("--tensor-shape", help="payload: torch.arange(numel) in this shape, e.g. 3,224,224")
    send.add_argument("--tensor-dtype",
                      help="the tensor's dtype (default float32; torch's names such as half or long too)")
    send.add_argument("--metadata", help="piggypayload: a JSON object")
    send.add_argument("--tag", type=tag_int, default=0, help="message tag (default 0)")
    send.add_argument("--timeout", type=positive_float, help="seconds to wait for the send (and the reply)")
    send.add_argument("--fail-fast", action="store_true", help="fail at once when the peer's send queue is full")
    send.add_argument("--expect-reply", action="store_true", help="then wait for one message back on the same tag")
    for name, text in (("recv", "receive messages from a peer and print them"),
                       ("echo", "send every message from a peer back to it")):
        p = sub.add_parser(name, parents=[after], help=text)
        p.add_argument("--src", required=True, help="the peer to receive from")
        p.add_argument("--tag", type=tag_int, default=0, help="message tag (default 0)")
        p.add_argument("--timeout", type=positive_float, help="seconds to wait for each message")
        p.add_argument("--count", type=count_int, default=1,
                       help="messages to handle (default 1; 0: serve until Ctrl-C)")
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    signals = Signals()  # first, so that no Ctrl-C ends the process with a traceback
    ap = parser()
    args = ap.parse_args(argv)  # exits with status 2 on a usage error
    args.config = args.config_after or args.config
    args.format = args.format_after or args.format or "v0.1"
    if not args.config:
        ap.error("the following arguments are required: --config")
    try:
        return asyncio.run(run(args, signals))
    finally:
        signals.ignore_from_now()


if __name__ == "__main__":
    sys.exit(main())
