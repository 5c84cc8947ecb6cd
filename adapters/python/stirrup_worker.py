"""sandproof's worker for Stirrup (a library, not a CLI): one task prompt, headless.

Runs a Stirrup Agent whose only tools are a shell in the current directory
(the task's workdir) and Stirrup's finish tool, against an OpenAI-compatible
endpoint, and exits 0 when the agent calls finish.

    python3 stirrup_worker.py [options] PROMPT
    python3 stirrup_worker.py [options] --prompt-file FILE

Endpoint and model: --base-url / --model, else $STIRRUP_BASE_URL /
$STIRRUP_MODEL. The API key is read from the variable --api-key-env names
(default $STIRRUP_API_KEY_ENV, else OPENAI_API_KEY), never from argv.

stdout carries only JSON lines: one {"type": "message", ...} per message of
the conversation (Stirrup's own message model, JSON-dumped), each as soon as
the worker has it (before every model request, the messages the request
carries), so a run stopped mid-way leaves its transcript so far; then one
{"type": "result", ...}. Stirrup's console log goes to stderr.

Stirrup ends a run only when the model calls its finish tool. With
--finish-on-text (or $STIRRUP_FINISH_ON_TEXT=1) a model answer that calls no
tool ends the run too, as most CLI harnesses do: the worker adds a finish
call carrying that text (marked "sandproof_finish_on_text" in the message's
metadata; the model was not asked again). Off by default.

Exit status: 0 the agent called finish; 3 it stopped without finishing
(max turns); 2 bad arguments; 1 an error (traceback on stderr).

Stdlib and stirrup only. Written against stirrup 0.2.1 (pinned by the lock):
the shell tool is Stirrup's LocalCodeExecToolProvider with its working
directory set to the workdir instead of a fresh temp dir (which it would
delete on exit), and without its absolute-path refusal (the sandbox, not the
tool, is the boundary).
"""

import argparse
import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

from stirrup import Agent, ToolCall
from stirrup.constants import DEFAULT_FINISH_TOOL_NAME
from stirrup.clients.chat_completions_client import ChatCompletionsClient
from stirrup.clients.open_responses_client import OpenResponsesClient
from stirrup.tools.code_backends.local import LocalCodeExecToolProvider

SHELL_DESCRIPTION = (
    "Run a bash command in the task's working directory. Returns exit code, "
    "stdout and stderr. The directory persists between calls; the shell does not."
)


class WorkdirShell(LocalCodeExecToolProvider):
    """Stirrup's local shell tool, run in a fixed existing directory that it neither creates nor removes."""

    def __init__(self, workdir: Path, shell_timeout: int) -> None:
        super().__init__(description=SHELL_DESCRIPTION, shell_timeout=shell_timeout)
        self._workdir = workdir

    async def __aenter__(self):
        self._temp_dir = self._workdir
        return self.get_code_exec_tool(description=SHELL_DESCRIPTION)

    async def __aexit__(self, exc_type, exc_val, exc_tb) -> None:
        self._temp_dir = None

    def _check_absolute_paths(self, argv, cmd):
        return None


class WrappedClient:
    """An LLM client that is another's, but for what a subclass's generate adds."""

    def __init__(self, client) -> None:
        self._client = client

    @property
    def model_slug(self) -> str:
        return self._client.model_slug

    @property
    def context_window_tokens(self) -> int:
        return self._client.context_window_tokens

    async def generate(self, messages, tools):
        return await self._client.generate(messages, tools)


class FinishOnText(WrappedClient):
    """An LLM client that turns an answer calling no tool into a call of the finish tool."""

    async def generate(self, messages, tools):
        msg = await self._client.generate(messages, tools)
        if DEFAULT_FINISH_TOOL_NAME not in tools or any(b.kind == "tool_call" for b in msg.blocks):
            return msg
        text = "".join(b.text for b in msg.blocks if b.kind == "text").strip() or "done"
        call = ToolCall(
            name=DEFAULT_FINISH_TOOL_NAME,
            arguments=json.dumps({"reason": text, "paths": []}),
            tool_call_id="sandproof-finish-on-text",
            has_provider_tool_call_id=False,
        )
        meta = {**msg.metadata, "sandproof_finish_on_text": True}
        return msg.model_copy(update={"blocks": [*msg.blocks, call], "metadata": meta})


class Streamed(WrappedClient):
    """An LLM client that writes each message of the conversation to out before the request that carries it."""

    def __init__(self, client, out) -> None:
        super().__init__(client)
        self._out = out
        self._sent = 0

    async def generate(self, messages, tools):
        self.flush(messages)
        return await self._client.generate(messages, tools)

    def flush(self, messages) -> None:
        """Write the messages not written yet (all of them again if the conversation was summarized)."""
        if len(messages) < self._sent:
            self._sent = 0
        for message in messages[self._sent:]:
            emit(self._out, {"type": "message", **message.model_dump(mode="json")})
        self._sent = len(messages)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="stirrup_worker", description=__doc__.split("\n\n")[0])
    p.add_argument("prompt", nargs="?", help="the task prompt (or --prompt-file)")
    p.add_argument("--prompt-file", type=Path, help="read the task prompt from this file")
    p.add_argument("--base-url", default=os.environ.get("STIRRUP_BASE_URL"))
    p.add_argument("--model", default=os.environ.get("STIRRUP_MODEL"))
    p.add_argument("--api-key-env", default=os.environ.get("STIRRUP_API_KEY_ENV", "OPENAI_API_KEY"))
    p.add_argument("--api", choices=["chat", "responses"], default=os.environ.get("STIRRUP_API", "chat"))
    p.add_argument("--workdir", type=Path, default=Path.cwd())
    p.add_argument("--max-turns", type=int, default=int(os.environ.get("STIRRUP_MAX_TURNS", "30")))
    p.add_argument("--max-tokens", type=int, default=8192)
    p.add_argument("--context-window", type=int, default=128000)
    p.add_argument("--shell-timeout", type=int, default=300)
    p.add_argument("--finish-on-text", action="store_true", default=os.environ.get("STIRRUP_FINISH_ON_TEXT") == "1")
    args = p.parse_args(argv)
    if (args.prompt is None) == (args.prompt_file is None):
        p.error("give the prompt as one argument or with --prompt-file, not both")
    if args.prompt_file is not None:
        args.prompt = args.prompt_file.read_text(encoding="utf-8")
    if not args.prompt.strip():
        p.error("the prompt is empty")
    if not args.base_url or not args.model:
        p.error("--base-url and --model (or $STIRRUP_BASE_URL and $STIRRUP_MODEL) are required")
    if not os.environ.get(args.api_key_env):
        p.error(f"${args.api_key_env} (the API key variable) is empty")
    if not args.workdir.is_dir():
        p.error(f"--workdir {args.workdir} is not a directory")
    return args


def make_client(args: argparse.Namespace):
    cls = OpenResponsesClient if args.api == "responses" else ChatCompletionsClient
    client = cls(
        model=args.model,
        max_tokens=args.max_tokens,
        context_window_tokens=args.context_window,
        base_url=args.base_url,
        api_key=os.environ[args.api_key_env],
    )
    return FinishOnText(client) if args.finish_on_text else client


async def run(args: argparse.Namespace, client):
    agent = Agent(
        client=client,
        name="sandproof_stirrup",
        max_turns=args.max_turns,
        tools=[WorkdirShell(args.workdir.resolve(), args.shell_timeout)],
    )
    async with agent.session(output_dir=None, cache_on_interrupt=False) as session:
        return await session.run(args.prompt)


def emit(out, record: dict) -> None:
    out.write(json.dumps(record, default=str) + "\n")
    out.flush()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = sys.stdout
    client = Streamed(make_client(args), out)
    with contextlib.redirect_stdout(sys.stderr):
        finish, history, _metadata = asyncio.run(run(args, client))
    if history:
        client.flush(history[-1])
    done = finish is not None
    emit(out, {"type": "result", "finished": done, "finish": finish.model_dump(mode="json") if done else None})
    return 0 if done else 3


if __name__ == "__main__":
    sys.exit(main())
