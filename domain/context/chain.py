"""The summariser chain (seed 001): the summarisers a compaction tries, in order.

A session names its chain in ``compaction.summarizers``, e.g.::

    ["conversation", "openai/gpt-4o-mini@cheap", "offline", "hard-drop"]

* ``conversation`` - the session's own model;
* a litellm model name, optionally ``@`` the name of an entry of the server's
  providers file (a name starting with a letter), which says where the model is
  served and with which key (so no key is ever written into settings or events);
* ``provider`` - the conversation model's provider compacts on its side (OpenAI's
  ``/responses/compact``, Anthropic's compaction), and its own compaction item is
  recorded as a provider compaction (served at ``summarizer_api_base`` when set);
* ``offline`` - the summariser that needs no model;
* ``hard-drop`` - no summary of the dropped part beyond an offline note: the
  oldest entries go until the rest fits. It always lands, so every chain ends
  with it, whether named or not.

Each step is tried on the failure, timeout or too large a result of the one
before it. Left empty, the chain is the session's ``summarizer_model`` (with
its ``summarizer_api_base``) when set, then ``offline``, then ``hard-drop``.
"""

from __future__ import annotations

from dataclasses import dataclass

from domain.settings import CompactionPolicy

CONVERSATION = "conversation"
PROVIDER = "provider"
OFFLINE = "offline"
HARD_DROP = "hard-drop"


@dataclass(frozen=True, slots=True)
class SummarizerStep:
    """One step of a chain: its name as the chain gives it, and what it runs."""

    name: str
    # A litellm model name, or OFFLINE or HARD_DROP.
    model: str
    # The providers file entry that serves the model ("": litellm's own defaults).
    provider: str = ""
    # The session's summarizer_api_base and summarizer_window_tokens, for its
    # summarizer_model (the chain's first step when no chain is named).
    api_base: str = ""
    window_tokens: int = 0
    # The provider compacts on its side (``provider``): ``model`` is the conversation's.
    remote: bool = False

    @property
    def is_model(self) -> bool:
        return self.model not in (OFFLINE, HARD_DROP)


def summarizer_chain(
    policy: CompactionPolicy, conversation_model: str
) -> tuple[SummarizerStep, ...]:
    """The steps a compaction under ``policy`` tries, in order, ending with the hard drop."""
    if policy.summarizers:
        steps = [_step(name, policy, conversation_model) for name in policy.summarizers]
    else:
        steps = []
        if policy.summarizer_model.strip() not in ("", OFFLINE):
            steps.append(
                SummarizerStep(
                    policy.summarizer_model.strip(),
                    policy.summarizer_model.strip(),
                    api_base=policy.summarizer_api_base,
                    window_tokens=policy.summarizer_window_tokens,
                )
            )
        steps.append(SummarizerStep(OFFLINE, OFFLINE))
    steps = [step for step in steps if step.model != HARD_DROP]
    return (*_unique(steps), SummarizerStep(HARD_DROP, HARD_DROP))


def provider_names(policy: CompactionPolicy) -> set[str]:
    """The providers file entries the chain names."""
    return {_step(name, policy, "").provider for name in policy.summarizers} - {""}


def _step(name: str, policy: CompactionPolicy, conversation_model: str) -> SummarizerStep:
    name = name.strip()
    if name in (OFFLINE, HARD_DROP):
        return SummarizerStep(name, name)
    if name == PROVIDER:
        return SummarizerStep(
            name, conversation_model, api_base=policy.summarizer_api_base, remote=True
        )
    model, provider = _split_provider(name)
    if model == CONVERSATION:
        model = conversation_model
    if model == policy.summarizer_model.strip() and not provider:
        # The session's own summariser settings go with its model.
        return SummarizerStep(
            name,
            model,
            api_base=policy.summarizer_api_base,
            window_tokens=policy.summarizer_window_tokens,
        )
    return SummarizerStep(name, model, provider)


def _split_provider(name: str) -> tuple[str, str]:
    """``model@provider`` apart. A suffix not starting with a letter is part of the model
    name (Vertex AI versions its models so: ``vertex_ai/claude-sonnet-4@20250514``)."""
    model, at, provider = name.rpartition("@")
    if at and model and provider[:1].isalpha():
        return model, provider
    return name, ""


def _unique(steps: list[SummarizerStep]) -> list[SummarizerStep]:
    seen: set[tuple[str, str, bool]] = set()
    unique = []
    for step in steps:
        if (step.model, step.provider, step.remote) not in seen:
            seen.add((step.model, step.provider, step.remote))
            unique.append(step)
    return unique
