"""The top `hourglass` command: where the API is and how to reach it (flags, environment, profile)."""

from __future__ import annotations

import click
from click.core import ParameterSource
from click.shell_completion import get_completion_class

from hourglass_client import profiles
from hourglass_client.cli.state import Group, State, shared_options
from hourglass_client.version import __version__

SHELLS = ["bash", "zsh", "fish"]

COMPLETION_HELP = """\b
Shell completion (bash, zsh or fish):
  bash: eval "$(hourglass completion bash)"     (in ~/.bashrc)
  zsh:  eval "$(hourglass completion zsh)"      (in ~/.zshrc)
  fish: hourglass completion fish > ~/.config/fish/completions/hourglass.fish

\b
Profiles (~/.config/hourglass/config.toml; HOURGLASS_CONFIG names another file):
  [default]
  url = "http://127.0.0.1:8080"
  key = "..."
  [prod]
  url = "https://....execute-api.eu-west-1.amazonaws.com/prod"
  auth = "api_key"
"""


def _version() -> str:
    return __version__


def _source(ctx: click.Context, param: str, flag: str, variable: str, profile: str) -> str:
    """Which setting gave a value: its flag, its environment variable, or the profile."""
    given = ctx.get_parameter_source(param)
    if given is ParameterSource.COMMANDLINE:
        return flag
    if given is ParameterSource.ENVIRONMENT:
        return variable
    return f"profile {profile}"


@click.group(cls=Group, epilog=COMPLETION_HELP)
@click.version_option(_version(), "--version", prog_name="hourglass", message="%(prog)s %(version)s")
@click.option(
    "--profile", envvar="HOURGLASS_PROFILE", metavar="NAME", help="profile of the config file [env HOURGLASS_PROFILE]"
)
@click.option("--url", envvar="HOURGLASS_URL", metavar="URL", help="API base URL [env HOURGLASS_URL]")
@click.option("--api-key", envvar="HOURGLASS_API_KEY", metavar="KEY", help="x-api-key value [env HOURGLASS_API_KEY]")
@click.option(
    "--auth",
    type=click.Choice(["api_key", "iam"]),
    envvar="HOURGLASS_AUTH",
    help="iam: sign requests with AWS SigV4 (standard credential chain) [env HOURGLASS_AUTH]",
)
@click.option(
    "--region", metavar="REGION", help="AWS region for --auth iam [default: the URL's, then the AWS configuration's]"
)
@click.option("--json", "as_json", is_flag=True, hidden=True, help="the same as --output jsonl")
@click.pass_context
def main(
    ctx: click.Context,
    profile: str | None,
    url: str | None,
    api_key: str | None,
    auth: str | None,
    region: str | None,
    as_json: bool,
) -> None:
    """Hourglass delay queue: manage queues, schedule and inspect messages."""
    try:
        chosen = profiles.load(profile or None)
    except profiles.ProfileError as exc:
        raise click.UsageError(str(exc)) from exc
    state = ctx.ensure_object(State)
    state.url, state.api_key, state.auth = url or chosen.url, api_key or chosen.key, auth or chosen.auth
    name = profile or "default"
    if state.url:
        state.url_source = _source(ctx, "url", "--url", "HOURGLASS_URL", name) if url else f"profile {name}"
    if state.api_key:
        state.key_source = (
            _source(ctx, "api_key", "--api-key", "HOURGLASS_API_KEY", name) if api_key else f"profile {name}"
        )
    state.region = region
    if as_json and state.output == "table":
        state.output = "jsonl"


main.params.extend(shared_options())


@main.command()
@click.argument("shell", type=click.Choice(SHELLS))
def completion(shell: str) -> None:
    """Print the completion script for SHELL (see `hourglass --help` for where it goes)."""
    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(main, {}, "hourglass", "_HOURGLASS_COMPLETE").source())
