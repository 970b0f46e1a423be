"""Every real DSH fixture loads (or is refused) exactly as upstream's loader does.

Expected values come from the fixture table of `session-log-format.md` §13: event count
after packed-row expansion, `capturedThroughSeq`, the number of projected conversation
items (a cross-check of the surface fold), and whether the session was compacted.
"""

# ruff: noqa: E501  (the fixture table keeps one row per line)
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from actors.session_log._errors import LogReadError, LogValidationError
from actors.session_log._reader import LoadedSession, load_session
from actors.session_log._titles import fold_subagent_descriptor, session_title

FIXTURES = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "dsh-sessions"

REJECT = "REJECT"

# (file, events, capturedThroughSeq or REJECT, projected items or upstream reason,
#  compacted, "contents" column), transcribed from the spec's table.
# fmt: off
TABLE: list[tuple[str, int, Any, Any, bool | None, str]] = [
    ('apps__web__tests__snapshots__approval-composer__session.jsonl', 1814, 1813, 2, False, 'no depth tool approval title packed legacy(turn-trigger)'),
    ('apps__web__tests__snapshots__code-mode-round__session.jsonl', 239, 238, 2, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__cordis-tool-round__session.jsonl', 60, REJECT, 'assistant/message cites a non-earlier seq (index 11)', None, 'no depth tool title legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__feedback-command__session.jsonl', 34, 33, 2, False, 'no depth title packed legacy(assistant,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__fresh-round-trip__session.jsonl', 94, 93, 2, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__goal-multi-turn-actions__session.jsonl', 2098, 2097, 4, False, 'no depth tool goal packed src:goal,p:system-prompt,p:tool-goal'),
    ('apps__web__tests__snapshots__lifecycle-chrome__session.jsonl', 34, 33, 2, False, 'no depth title packed legacy(assistant,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__live-interactions__session.jsonl', 92, 91, 2, False, 'no depth title packed legacy(assistant,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__message-feedback-protocol__session.jsonl', 6, 5, 2, False, 'no depth'),
    ('apps__web__tests__snapshots__minimal-preset__session.jsonl', 6, 5, 1, False, 'no depth agentPreset legacy(user-noid)'),
    ('apps__web__tests__snapshots__navigation-panes__seed.jsonl', 253, 252, 4, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__permission-policy-context__session.jsonl', 813, 812, 8, False, 'no depth tool approval title packed legacy(turn-trigger) src:p:dsh-tool-skill,p:system-prompt'),
    ('apps__web__tests__snapshots__plan-narrow-viewport__session.jsonl', 0, None, 0, False, 'no depth'),
    ('apps__web__tests__snapshots__plan-review__session.jsonl', 343, 342, 3, False, 'no depth tool title packed legacy(turn-trigger)'),
    ('apps__web__tests__snapshots__pwsh-terminal__seed.jsonl', 18, 17, 1, False, 'no depth no cwd tool title legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__question-composer__session.jsonl', 166, 165, 2, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__seeded-history__seed.jsonl', 111, 110, 2, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__steering__session.jsonl', 143, 142, 3, False, 'no depth tool title packed legacy(assistant,toolresult,turn-trigger,user-noid)'),
    ('apps__web__tests__snapshots__turn-tail-actions__session.jsonl', 101, 100, 3, False, 'no depth tool title packed legacy(turn-trigger) src:p:system-prompt'),
    ('apps__web__tests__snapshots__web-search-round__session.jsonl', 11, 10, 1, False, 'no depth legacy(user-noid)'),
    ('examples__acp-agent__tests__goal-snapshots__goal-round-driver__session.expected.jsonl', 62, 61, 4, False, 'tool goal title src:goal,p:system-prompt'),
    ('examples__acp-agent__tests__goal-snapshots__goal-round-driver__session.jsonl', 0, None, 0, False, 'no depth'),
    ('examples__acp-agent__tests__goal-snapshots__goal-wrapup__session.expected.jsonl', 55, 54, 3, False, 'tool goal title src:goal,p:system-prompt,p:tool-goal'),
    ('examples__acp-agent__tests__goal-snapshots__goal-wrapup__session.jsonl', 0, None, 0, False, 'no depth'),
    ('examples__acp-agent__tests__snapshots__advanced-toolchain__session.1.jsonl', 19, 18, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__advanced-toolchain__session.2.jsonl', 19, 18, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__advanced-toolchain__session.jsonl', 75, 74, 2, False, 'tool workflow title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__agent-instructions__session.jsonl', 45, 44, 3, True, '**replace** tool title src:agent-instructions,p:compact,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__background-job-admission__session.jsonl', 57, 56, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__bash-spill__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__bash-tool-turn__session.jsonl', 102, 101, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__both-mode-turn__session.jsonl', 154, 153, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__cancel-tool-calls__session.jsonl', 24, 23, 1, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__cancel__session.jsonl', 14, 13, 2, False, 'title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__code-mode-read-image__session.jsonl', 32, 31, 2, False, 'tool title src:p:system-prompt,p:tools-code-mode'),
    ('examples__acp-agent__tests__snapshots__code-mode-turn__session.jsonl', 255, 254, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__code-mode-workspace-context__session.jsonl', 33, 32, 2, False, 'tool title src:agent-instructions,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__cordis-inspect-jsdoc__session.jsonl', 37, 36, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__empty-response-retry__session.jsonl', 21, 20, 2, False, 'retry title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__error-finish__session.jsonl', 12, 11, 1, False, 'title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__escalation-approved__session.jsonl', 189, 188, 2, False, 'tool approval title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__escalation-rejected__session.jsonl', 216, 215, 2, False, 'tool approval title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-delete-recreate__session.jsonl', 191, 190, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-edit__session.jsonl', 163, 162, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-escalation-approved__session.jsonl', 128, 127, 2, False, 'tool approval title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-glob-sampling__session.jsonl', 121, 120, 2, False, 'tool title packed'),
    ('examples__acp-agent__tests__snapshots__fs-policy-reject__session.jsonl', 262, 261, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-read-window__session.jsonl', 138, 137, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-read__session.jsonl', 110, 109, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-write-overwrite-bounded__session.jsonl', 112, 111, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-write-overwrite__session.jsonl', 150, 149, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__fs-write__session.jsonl', 99, 98, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__handshake__session.jsonl', 0, None, 0, False, 'no cwd'),
    ('examples__acp-agent__tests__snapshots__hook-cc-invalid-matcher__session.jsonl', 40, 39, 2, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-posttool-block__session.jsonl', 181, 180, 2, False, 'tool hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-posttool-context__session.jsonl', 132, 131, 2, False, 'tool hook title packed src:p:hooks-claude-code,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-pretool-ask__session.jsonl', 119, 118, 2, False, 'tool approval hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-pretool-deny__session.jsonl', 124, 123, 2, False, 'tool hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-promptsubmit-block__session.jsonl', 0, None, 0, False, ''),
    ('examples__acp-agent__tests__snapshots__hook-cc-promptsubmit-context__session.jsonl', 42, 41, 2, False, 'hook title packed src:p:hooks-claude-code,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-cc-stop-continue__session.jsonl', 73, 72, 3, False, 'hook title packed src:p:hooks-claude-code,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-invalid-matcher__session.jsonl', 40, 39, 2, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-posttool-block__session.jsonl', 122, 121, 2, False, 'tool hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-posttool-context__session.jsonl', 122, 121, 2, False, 'tool hook title packed src:p:hooks-codex,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-pretool-block__session.jsonl', 121, 120, 2, False, 'tool hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-promptsubmit-block__session.jsonl', 0, None, 0, False, ''),
    ('examples__acp-agent__tests__snapshots__hook-codex-promptsubmit-context__session.jsonl', 61, 60, 2, False, 'hook title packed src:p:hooks-codex,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__hook-codex-stop-continue__session.jsonl', 73, 72, 3, False, 'hook title packed src:p:hooks-codex,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__inline-image-prompt__session.jsonl', 16, 15, 2, False, 'title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__lsp-definition__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__max-tokens-continue__session.jsonl', 32, 31, 4, False, 'title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__missing-sandbox-runner__session.jsonl', 50, 49, 2, False, 'tool title src:p:system-prompt,p:tool-jobs'),
    ('examples__acp-agent__tests__snapshots__multi-turn__session.jsonl', 71, 70, 4, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__packed-chunks__session.jsonl', 124, 123, 2, False, 'tool hook title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__parallel-tool-calls__session.jsonl', 32, 31, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__partial-landlock-child-failure__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__persistent-pwsh-tool-turn__session.jsonl', 98, 97, 2, False, 'tool title packed'),
    ('examples__acp-agent__tests__snapshots__product-subagent-both__session.jsonl', 40, 39, 2, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__product-subagent-codex__session.jsonl', 40, 39, 2, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__product-subagent-result-diagnostic__session.jsonl', 83, 82, 2, False, 'tool title src:p:system-prompt,p:tool-jobs'),
    ('examples__acp-agent__tests__snapshots__pty-tools__session.jsonl', 77, 76, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__pwsh-tool-turn__session.jsonl', 112, 111, 2, False, 'tool title packed'),
    ('examples__acp-agent__tests__snapshots__read-image-dimension__session.jsonl', 25, 24, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__read-image-text-route__session.jsonl', 25, 24, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__read-image__session.jsonl', 25, 24, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__reject-extra-dirs__session.jsonl', 0, None, 0, False, 'no cwd'),
    ('examples__acp-agent__tests__snapshots__repeat-tool-reminder__session.jsonl', 78, 77, 2, False, 'tool todo title src:p:repeat-tool-reminder,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__session-query-spill__session.jsonl', 37, 36, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__session-sandbox-root__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__session-title-after-turn__session.jsonl', 19, 18, 2, False, 'title-llm title×2 src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__skill-load__session.jsonl', 34, 33, 2, False, 'tool title src:p:system-prompt,skill-catalog'),
    ('examples__acp-agent__tests__snapshots__subagent-child-question-rejection__session.1.jsonl', 29, 28, 2, False, 'parentSession origin tool desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-child-question-rejection__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-continuable-inheritance__session.1.jsonl', 21, 20, 2, False, 'parentSession origin desc seed-end title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-continuable-inheritance__session.jsonl', 41, 40, 3, False, 'tool title src:p:system-prompt,subagent-settled'),
    ('examples__acp-agent__tests__snapshots__subagent-continuable__session.1.jsonl', 37, 36, 3, False, 'parentSession origin desc seed-end title src:coordinator,p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-continuable__session.jsonl', 70, 69, 3, False, 'tool title src:p:system-prompt,subagent-settled'),
    ('examples__acp-agent__tests__snapshots__subagent-depth-two-rejection__session.1.jsonl', 29, 28, 2, False, 'parentSession origin tool desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-depth-two-rejection__session.2.jsonl', 29, 28, 2, False, 'parentSession origin tool desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-depth-two-rejection__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-fork-in-process__session.1.jsonl', 99, 98, 4, False, 'parentSession seedLength origin desc seed-end title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-fork-in-process__session.jsonl', 200, 199, 4, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-list-agents__session.1.jsonl', 20, 19, 2, False, 'parentSession origin desc seed-end title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-list-agents__session.jsonl', 63, 62, 5, False, 'tool title src:p:system-prompt,subagent-settled'),
    ('examples__acp-agent__tests__snapshots__subagent-max-tokens-partial__session.1.jsonl', 30, 29, 2, False, 'parentSession origin tool desc todo title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-max-tokens-partial__session.jsonl', 25, 24, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-mixed__session.1.jsonl', 42, 41, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-mixed__session.2.jsonl', 89, 88, 4, False, 'parentSession seedLength origin desc seed-end title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-mixed__session.jsonl', 294, 293, 4, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-multi__session.1.jsonl', 42, 41, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-multi__session.2.jsonl', 40, 39, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-multi__session.jsonl', 212, 211, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-parallel__session.1.jsonl', 17, 16, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-parallel__session.2.jsonl', 17, 16, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-parallel__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-published-run-failure__session.1.jsonl', 1, 0, 0, False, 'parentSession origin'),
    ('examples__acp-agent__tests__snapshots__subagent-published-run-failure__session.jsonl', 27, 26, 2, False, 'tool title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-report__session.1.jsonl', 30, 29, 2, False, 'parentSession origin tool desc seed-end title src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-report__session.jsonl', 56, 55, 5, False, 'tool title src:p:system-prompt,subagent-report,subagent-settled'),
    ('examples__acp-agent__tests__snapshots__subagent-spawn-in-process__session.1.jsonl', 40, 39, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__subagent-spawn-in-process__session.jsonl', 164, 163, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__text-turn__session.jsonl', 40, 39, 2, False, 'title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__todo-write__session.jsonl', 115, 114, 2, False, 'tool todo title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__tool-call-turn__session.jsonl', 104, 103, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__web-fetch__session.jsonl', 130, 129, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__workflow-run__session.1.jsonl', 42, 41, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__workflow-run__session.jsonl', 217, 216, 2, False, 'tool workflow title packed src:p:system-prompt'),
    ('examples__acp-agent__tests__snapshots__workspace-edit__session.jsonl', 245, 244, 2, False, 'tool title packed src:p:system-prompt'),
    ('examples__headless-agent__tests__semantic-checkpoint-snapshots__tool-outcome-unknown__replay.jsonl', 0, None, 0, False, 'no cwd'),
    ('examples__headless-agent__tests__semantic-checkpoint-snapshots__tool-outcome-unknown__session.expected.jsonl', 24, 23, 3, False, 'tool seed-end title'),
    ('examples__headless-agent__tests__snapshots__advanced-toolchain__session.1.jsonl', 18, 17, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__headless-agent__tests__snapshots__advanced-toolchain__session.2.jsonl', 18, 17, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('examples__headless-agent__tests__snapshots__advanced-toolchain__session.jsonl', 74, 73, 2, False, 'tool workflow title'),
    ('examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl', 31, 30, 2, True, '**replace** tool compaction title src:p:compact'),
    ('examples__headless-agent__tests__snapshots__headless-profile__session.expected.jsonl', 32, 31, 2, False, 'tool title-llm title src:p:system-prompt'),
    ('examples__headless-agent__tests__snapshots__pty-tools__session.jsonl', 77, 76, 2, False, 'tool title src:p:system-prompt'),
    ('examples__headless-agent__tests__snapshots__ralph-loop__session.1.jsonl', 5, 4, 0, False, 'no depth parentSession'),
    ('examples__headless-agent__tests__snapshots__ralph-loop__session.2.jsonl', 5, 4, 0, False, 'no depth parentSession'),
    ('examples__headless-agent__tests__snapshots__ralph-loop__session.jsonl', 0, None, 0, False, 'no depth'),
    ('examples__headless-agent__tests__snapshots__subagent-settlement__child.expected.jsonl', 19, 18, 2, False, 'parentSession origin desc seed-end title src:p:system-prompt'),
    ('examples__headless-agent__tests__snapshots__subagent-settlement__child.replay.jsonl', 5, 4, 0, False, 'no cwd'),
    ('examples__headless-agent__tests__snapshots__subagent-settlement__parent.replay.jsonl', 0, None, 0, False, 'no cwd'),
    ('examples__headless-agent__tests__subagent-diagnostic-snapshots__descriptorless-child__parent.expected.jsonl', 30, 29, 3, False, 'tool seed-end title'),
    ('examples__headless-agent__tests__subagent-inheritance-snapshots__parent-override__child.expected.jsonl', 29, 28, 2, False, 'parentSession origin tool desc title src:p:system-prompt'),
    ('examples__headless-agent__tests__subagent-inheritance-snapshots__parent-override__child.replay.jsonl', 17, 16, 1, False, 'no cwd legacy(turn-trigger,user-noid)'),
    ('examples__headless-agent__tests__subagent-inheritance-snapshots__parent-override__parent.expected.jsonl', 32, 31, 3, False, 'tool seed-end title src:p:system-prompt'),
    ('examples__headless-agent__tests__workspace-context-resume-snapshots__offline-edit__replay.jsonl', 0, None, 0, False, 'no cwd'),
    ('examples__headless-agent__tests__workspace-context-resume-snapshots__offline-edit__session.expected.jsonl', 21, 20, 3, False, 'seed-end title src:agent-instructions'),
    ('examples__headless-agent__tests__workspace-context-resume-snapshots__precedence-change__session.expected.jsonl', 21, 20, 3, False, 'seed-end title src:agent-instructions'),
    ('examples__jsonrpc-agent__tests__snapshots__bash-tool__session.jsonl', 99, 98, 2, False, 'tool title packed'),
    ('examples__jsonrpc-agent__tests__snapshots__persistent-tools__session.jsonl', 76, 75, 2, False, 'tool title'),
    ('examples__jsonrpc-agent__tests__snapshots__subagent-spawn-in-process__session.1.jsonl', 38, 37, 2, False, 'parentSession origin desc title packed src:p:system-prompt'),
    ('examples__jsonrpc-agent__tests__snapshots__subagent-spawn-in-process__session.jsonl', 142, 141, 2, False, 'tool title packed'),
    ('examples__jsonrpc-agent__tests__snapshots__text-turn__session.jsonl', 40, 39, 2, False, 'title packed'),
    ('packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-child__session.1.jsonl', 2, REJECT, 'request/header lacks provider/model', None, '**no version** parentSession'),
    ('packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-child__session.jsonl', 2, REJECT, 'request/header lacks provider/model', None, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-pin__session.1.jsonl', 1, REJECT, 'request/header lacks provider/model', None, '**no version** no depth parentSession'),
    ('packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-pin__session.jsonl', 1, REJECT, 'request/header lacks provider/model', None, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__record-suite__rec-skip__session.jsonl', 0, None, 0, False, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl', 1, REJECT, 'malformed legacy turn/end', None, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__blocked-log__session.jsonl', 1, 0, 0, False, '**no version** hook'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__no-model__session.jsonl', 0, None, 0, False, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__pin-turn__session.jsonl', 3, REJECT, 'request/header lacks provider/model', None, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__plain-turn__session.1.jsonl', 1, REJECT, 'request/header lacks provider/model', None, '**no version** parentSession'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__plain-turn__session.jsonl', 2, REJECT, 'request/header lacks provider/model', None, '**no version**'),
    ('packages__test-support__acp-snapshot__tests__fixtures__suite__shared-pin__session.jsonl', 3, REJECT, 'request/header lacks provider/model', None, '**no version**'),
    ('scripts__snapshots__python-sdk-single-exe__advanced__session.1.jsonl', 18, 17, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('scripts__snapshots__python-sdk-single-exe__advanced__session.2.jsonl', 18, 17, 2, False, 'parentSession origin desc title src:p:system-prompt'),
    ('scripts__snapshots__python-sdk-single-exe__advanced__session.jsonl', 84, 83, 2, False, 'tool workflow title'),
]
# fmt: on

# What each upstream rejection reason looks like in our (upstream-worded) error detail.
REJECTION_DETAILS = {
    "request/header lacks provider/model": "seed request/header at index 0 lacks provider/model",
    "malformed legacy turn/end": "contains malformed pre-react-loop turn/end at seq 0",
    "assistant/message cites a non-earlier seq (index 11)": (
        "sourceEventSeqs must reference earlier events: 11 >= current seq 11"
    ),
}


def _fixture(name: str) -> Path:
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    return FIXTURES / name


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return "\n".join(
        block["text"]
        for block in blocks
        if isinstance(block, dict)
        and block.get("type") == "text"
        and isinstance(block.get("text"), str)
    )


def _project(loaded: LoadedSession) -> tuple[int, bool]:
    """Count projected items the way `session-reference.md` §4.4 does; report compaction."""
    items = 0
    compacted = False
    for event in loaded.surface_events():
        if event["type"] == "user/message":
            source = event["data"]["source"]
            checkpoint = source.get("kind") == "plugin" and source.get("plugin") == "compact"
            if (checkpoint or source.get("kind") == "user") and _text(event["data"]):
                items += 1
                compacted = compacted or checkpoint
        elif event["type"] == "assistant/message" and _text(event["data"]["message"]):
            items += 1
    return items, compacted


def test_table_covers_every_fixture() -> None:
    """The expected-value table names exactly the files in the fixture folder."""
    if not FIXTURES.is_dir():
        pytest.skip(f"DSH fixtures not found at {FIXTURES}")
    names = {entry.name for entry in FIXTURES.iterdir() if entry.name.endswith(".jsonl")}
    assert names == {row[0] for row in TABLE}
    assert sum(1 for row in TABLE if row[2] == REJECT) == 10


LOADED = [row for row in TABLE if row[2] != REJECT]
REJECTED = [row for row in TABLE if row[2] == REJECT]


@pytest.mark.parametrize(
    ("name", "events", "through", "items", "compacted", "contents"),
    LOADED,
    ids=[r[0] for r in LOADED],
)
def test_fixture_loads_like_upstream(
    name: str, events: int, through: int | None, items: int, compacted: bool, contents: str
) -> None:
    """A fixture upstream loads gives the same events, capturedThroughSeq and surface."""
    path = _fixture(name)
    loaded = load_session(path)
    raw_header = json.loads(path.read_bytes().split(b"\n", 1)[0])
    assert loaded.header.to_record() == raw_header
    assert list(loaded.header.to_record()) == list(raw_header)
    assert len(loaded.events) == events
    assert loaded.captured_through_seq == through
    assert [event["seq"] for event in loaded.events] == list(range(events))
    assert loaded.closers == ()
    assert loaded.torn is None
    assert _project(loaded) == (items, compacted)
    assert bool(loaded.replacements) == ("replace" in contents)
    title = session_title(loaded.events)
    assert (title is not None) == (" title" in f" {contents}")
    descriptor = fold_subagent_descriptor(loaded.events)
    assert (descriptor is not None) == ("desc" in contents)
    header = loaded.header
    assert (header.cwd is None) == ("no cwd" in contents)
    assert (header.parent_session is not None) == ("parentSession" in contents)
    assert (header.seed_length is not None) == ("seedLength" in contents)
    assert (header.origin == "subagent") == ("origin" in contents)
    assert (header.agent_preset is not None) == ("agentPreset" in contents)
    packed = any(b'"seq0":' in line for line in path.read_bytes().splitlines()[1:])
    assert packed == ("packed" in contents)


@pytest.mark.parametrize(
    ("name", "events", "through", "reason", "compacted", "contents"),
    REJECTED,
    ids=[r[0] for r in REJECTED],
)
def test_fixture_rejected_like_upstream(
    name: str, events: int, through: str, reason: str, compacted: None, contents: str
) -> None:
    """A fixture upstream rejects raises a typed error naming the file and the reason."""
    path = _fixture(name)
    with pytest.raises(LogReadError) as caught:
        load_session(path)
    error = caught.value
    assert isinstance(error, LogValidationError)
    assert error.query_code == "SESSION_QUERY_CORRUPT_SESSION"
    assert error.path == path
    assert str(path) in str(error)
    assert REJECTION_DETAILS[reason] in error.detail
    session_id = json.loads(path.read_bytes().split(b"\n", 1)[0])["id"]
    assert str(error).startswith(f'stored session "{session_id}" failed validation: Error: ')
