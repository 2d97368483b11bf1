"""`python -m wireless_comm.node`: the V0.1 node CLI, with the sub-commands, flags, output
lines and exit codes of `wcomm node` (src/tools/node_command.cpp), so either can stand in for
the other on one side of a link.

    python -m wireless_comm.node --config configs/node-b.yaml echo --src node-a --tag 1 --count 1
    python -m wireless_comm.node --config configs/node-a.yaml send --dst node-b --tag 1 \\
        --json '{"message":"hello"}' --metadata '{"trace_id":"wifi-test-1"}' --expect-reply

Exit status: 0 done, 1 the network or the peer failed, 2 bad command line or config,
130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from typing import Any, List, Optional

from . import _core
from .comm import Comm
from .config import CommOptions, Peer, RuntimeConfig, load_runtime_config
from .errors import (
    CommError,
    ConnectionClosedError,
    ConnectionFailedError,
    OperationTimeoutError,
)

EXIT_OK, EXIT_COMM_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
PROG = "python -m wireless_comm.node"
DTYPES = ("uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "bool")
PATTERN_MODULUS = 251  # prime, so the pattern does not line up with power-of-two dimensions


class UsageError(Exception):
    """A mistake in what the user typed; the message names the option."""


def fail(code: int, message: str) -> int:
    print(f"wireless_comm.node: {message}", file=sys.stderr, flush=True)
    return code


def say(line: str) -> None:
    print(line, flush=True)


# -- payloads (as src/tools/payload.cpp builds them) ---------------------------------------------


def parse_json_option(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{option}: not valid JSON: {e}") from None


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


def pattern_tensor(dtype: str, shape: List[int]) -> Any:
    """Element i holds (i mod 251) in dtype (wrapping for int8, != 0 for bool): a receiver can
    check every byte arrived where it belongs. The same pattern as `wcomm node`."""
    if dtype not in DTYPES:
        raise UsageError(f"--tensor-dtype: unknown dtype '{dtype}'; use one of {' '.join(DTYPES)}")
    n = 1
    for d in shape:
        n *= d
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        base = torch.arange(n, dtype=torch.int64) % PATTERN_MODULUS
        if dtype == "bool":
            return (base != 0).reshape(shape)
        if dtype == "int8":
            return base.to(torch.uint8).view(torch.int8).reshape(shape)
        return base.to(getattr(torch, dtype)).reshape(shape)
    import numpy as np

    if dtype == "bfloat16":
        raise UsageError("--tensor-dtype: bfloat16 needs torch (numpy has no bfloat16)")
    base = np.arange(n, dtype=np.int64) % PATTERN_MODULUS
    if dtype == "bool":
        return (base != 0).reshape(shape)
    return base.astype(np.uint8).view(np.int8).reshape(shape) if dtype == "int8" else base.astype(dtype).reshape(shape)


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
    return pattern_tensor(args.tensor_dtype or "float32", parse_shape("--tensor-shape", args.tensor_shape))


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
        return fail(EXIT_COMM_ERROR, f"{what} {where} timed out after {timeout:g} s: {e}")
    if isinstance(e, ConnectionFailedError):
        return fail(EXIT_COMM_ERROR, f"{what} {where} failed: cannot reach it (is it running?): {e}")
    return fail(EXIT_COMM_ERROR, f"{what} {where} failed: {type(e).__name__}: {e}")


def print_received(peer: Peer, tag: int, got: Any) -> None:
    say(f"received from {peer.node_id} tag={tag} message_id={got.message_id} wire_bytes={got.wire_bytes} "
        f"value={_core.summarize(got.value)} piggypayload={_core.summarize(got.piggypayload)}")


class Node:
    def __init__(self, comm: Comm) -> None:
        self.comm = comm
        self.interrupted = False
        self.wakeup = asyncio.Event()

    def on_signal(self) -> None:
        # Closing the Comm fails the pending send or recv, which wakes the command.
        self.interrupted = True
        self.wakeup.set()
        asyncio.get_running_loop().create_task(self.comm.close())

    async def sleep(self, seconds: float) -> bool:
        """Sleeps unless a signal comes first; True when interrupted."""
        try:
            await asyncio.wait_for(self.wakeup.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        return self.interrupted

    async def send(self, args: argparse.Namespace, payload: Any, metadata: Any) -> int:
        dst = self.comm.peer(args.dst)
        summary = _core.summarize(payload)
        options = CommOptions(tag=args.tag, timeout=args.timeout, wait_for_capacity=not args.fail_fast)
        try:
            sent = await self.comm.send(payload, dst, metadata, options)
            say(f"sent message_id={sent.message_id} wire_bytes={sent.wire_bytes} tag={args.tag} value={summary}")
        except CommError as e:
            if self.interrupted:
                return fail(EXIT_INTERRUPTED, "interrupted")
            return comm_failure("send to", dst, e, args.timeout)
        if not args.expect_reply:
            return EXIT_OK
        try:
            got = await self.comm.recv_message(dst, CommOptions(tag=args.tag, timeout=args.timeout))
            print_received(dst, args.tag, got)
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
            print_received(src, args.tag, got)
            done += 1
            if not echo:
                continue
            try:
                sent = await self.comm.send(got.value, src, got.piggypayload, options)
                say(f"echoed to {src.node_id} tag={args.tag} message_id={sent.message_id} "
                    f"wire_bytes={sent.wire_bytes}")
            except CommError as e:
                code = await on_error("echo to", e)
                if code is not None:
                    return code
        return EXIT_OK


async def run(args: argparse.Namespace) -> int:
    try:
        config = load_runtime_config(args.config)
    except (OSError, ValueError) as e:
        return fail(EXIT_USAGE, f"--config: {e}")
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
        return fail(EXIT_USAGE, str(e))

    try:
        comm = await Comm.create(local=config.local, peers=config.peers, bind_host=config.bind_host,
                                 config=config.comm)
    except ValueError as e:
        return fail(EXIT_USAGE, f"--config: {e}")
    except CommError as e:
        return fail(EXIT_COMM_ERROR, f"cannot start {config.local.node_id} on {config.bind_host}:"
                                     f"{config.local.port}: {e}")
    node = Node(comm)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, node.on_signal)
    try:
        if args.command == "send":
            return await node.send(args, payload, metadata)
        return await node.serve(args, echo=args.command == "echo")
    finally:
        await comm.close()


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
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
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
    sub = ap.add_subparsers(dest="command", metavar="{send,recv,echo}")
    sub.required = True
    # V0.1 takes --config before the sub-command; it may come after it too.
    after = argparse.ArgumentParser(add_help=False)
    after.add_argument("--config", dest="config_after", help=argparse.SUPPRESS)

    send = sub.add_parser("send", parents=[after], help="send one message to a peer")
    send.add_argument("--dst", required=True, help="the peer to send to")
    send.add_argument("--json", help="payload: a JSON document (objects become dicts)")
    send.add_argument("--text", help="payload: a string")
    send.add_argument("--file", help="payload: the bytes of a file")
    send.add_argument("--tensor-shape", help="payload: a patterned tensor of this shape, e.g. 3,224,224")
    send.add_argument("--tensor-dtype", help="the tensor's dtype (default float32)")
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
    ap = parser()
    args = ap.parse_args(argv)  # exits with status 2 on a usage error
    args.config = args.config_after or args.config
    if not args.config:
        ap.error("the following arguments are required: --config")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
