// memd for OpenCode: persistent memory, guards and outcome learning (written by `memd init`;
// `memd uninstall` removes this file). No dependencies: it runs memd's hook binaries, which
// find this user's memd, prove it is genuine before sending anything, and fail open.
//
// Per turn: `chat.message` asks memd for context; the system prompt (never the user's
// message, which OpenCode shows back) gets KNOWN CONTEXT and, on scoring turns, the SCORING
// REFERENCE block with the lean scoring request; `bash` calls pass memd's guard first; when
// the session goes idle the exchange is stored. Subagent sessions get guards only.

import { spawn } from "node:child_process";
import { join } from "node:path";

/** Where `hook-prompt` and `hook-stop` are installed (set by `memd init`). */
const HOOK_DIR: string = "__MEMD_HOOK_DIR__";
/** The hook's file name: Windows executables end in `.exe`. */
const exeName = (exe: string): string => (process.platform === "win32" ? `${exe}.exe` : exe);
/** Longest wait for an answer; the hooks' own deadline (2 s by default) is shorter. */
const ANSWER_WAIT_MS = 5000;
/** The MCP tool through which the agent scores (OpenCode names it `<server>_<tool>`). */
const SCORE_TOOL = "memd_score_response";
/** Tools whose results are evidence for memd (never their output: only the exit code). */
const EVIDENCE_TOOLS = new Set(["bash", "edit", "write", "patch"]);

type Answer = Record<string, unknown>;

interface Turn {
  prompt: string;
  scoring: string;
  context: string;
  scored: boolean;
  stored: boolean;
  /** Text parts seen during this turn, by part id: their message and latest text. */
  parts: Map<string, { message: string; text: string }>;
}

/** Runs a hook with `payload` on stdin and returns its JSON answer, or null on any failure. */
function ask(exe: string, payload: Answer): Promise<Answer | null> {
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (value: Answer | null) => {
      if (!done) {
        done = true;
        resolve(value);
      }
    };
    try {
      const child = spawn(join(HOOK_DIR, exeName(exe)), ["--opencode"], {
        stdio: ["pipe", "pipe", "ignore"],
      });
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        finish(null);
      }, ANSWER_WAIT_MS);
      child.on("error", () => finish(null));
      child.stdout?.on("data", (chunk) => (out += chunk.toString()));
      child.on("close", () => {
        clearTimeout(timer);
        try {
          finish(out.trim() ? (JSON.parse(out) as Answer) : null);
        } catch {
          finish(null);
        }
      });
      child.stdin?.on("error", () => finish(null));
      child.stdin?.end(JSON.stringify(payload));
    } catch {
      finish(null);
    }
  });
}

/** Runs a hook in the background: it outlives OpenCode if OpenCode exits first. */
function tell(exe: string, payload: Answer): void {
  try {
    const child = spawn(join(HOOK_DIR, exeName(exe)), ["--opencode"], {
      stdio: ["pipe", "ignore", "ignore"],
      detached: true,
    });
    child.on("error", () => {});
    child.stdin?.on("error", () => {});
    child.stdin?.end(JSON.stringify(payload));
    child.unref();
  } catch {
    // Fail open: memd missing never breaks a session.
  }
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

/**
 * The prompt as the user wrote it: `opencode run "fix the tests"` hands the agent the message
 * wrapped in quotes (inner quotes escaped), and memd finds nothing for a prompt in quotes.
 */
function unquoted(prompt: string): string {
  const m = /^"((?:[^"\\]|\\.)*)"$/s.exec(prompt.trim());
  return m ? m[1].replace(/\\"/g, '"') : prompt;
}

export const MemdPlugin = async (input: { directory: string; worktree: string }) => {
  const cwd = input.directory;
  const projectDir = input.worktree || input.directory;
  const turns = new Map<string, Turn>();
  const subagents = new Set<string>();
  const assistantMessages = new Set<string>();

  return {
    "chat.message": async (
      hook: { sessionID: string },
      output: { parts: Array<{ type: string; text?: string; synthetic?: boolean }> },
    ) => {
      try {
        if (subagents.has(hook.sessionID)) return;
        const prompt = unquoted(
          output.parts
            .filter((p) => p.type === "text" && !p.synthetic)
            .map((p) => text(p.text))
            .join("\n"),
        );
        const turn: Turn = {
          prompt,
          scoring: "",
          context: "",
          scored: false,
          stored: false,
          parts: new Map(),
        };
        turns.set(hook.sessionID, turn);
        const answer = await ask("hook-prompt", {
          hook_event_name: "chat.message",
          session_id: hook.sessionID,
          prompt,
          cwd,
          project_dir: projectDir,
        });
        turn.scoring = text(answer?.scoring);
        turn.context = text(answer?.context);
      } catch {
        // Fail open.
      }
    },

    "experimental.chat.system.transform": async (
      hook: { sessionID?: string },
      output: { system: string[] },
    ) => {
      const turn = hook.sessionID ? turns.get(hook.sessionID) : undefined;
      if (!turn) return;
      // Once the agent has scored, later steps of the turn do not ask again.
      if (turn.scoring && !turn.scored) output.system.push(turn.scoring);
      if (turn.context) output.system.push(turn.context);
    },

    "tool.execute.before": async (
      hook: { tool: string; sessionID: string },
      output: { args: unknown },
    ) => {
      if (hook.tool !== "bash") return;
      const answer = await ask("hook-prompt", {
        hook_event_name: "tool.execute.before",
        session_id: hook.sessionID,
        tool_name: hook.tool,
        tool_input: output.args,
        cwd,
        project_dir: projectDir,
      });
      // Throwing is how an OpenCode plugin refuses a tool: the agent gets the message.
      if (answer?.decision === "deny") throw new Error(text(answer.reason) || "memd guard");
    },

    "tool.execute.after": async (
      hook: { tool: string; sessionID: string; args?: unknown },
      output: { metadata?: Record<string, unknown> },
    ) => {
      try {
        const turn = turns.get(hook.sessionID);
        if (turn && hook.tool === SCORE_TOOL) turn.scored = true;
        if (!EVIDENCE_TOOLS.has(hook.tool)) return;
        const exit = output.metadata?.exit ?? output.metadata?.exitCode;
        tell("hook-stop", {
          hook_event_name: "tool.execute.after",
          session_id: hook.sessionID,
          tool_name: hook.tool,
          tool_input: hook.args ?? {},
          exit_code: typeof exit === "number" ? exit : undefined,
          cwd,
          project_dir: projectDir,
        });
      } catch {
        // Fail open.
      }
    },

    event: async ({ event }: { event: { type: string; properties?: any } }) => {
      try {
        const p = event.properties ?? {};
        switch (event.type) {
          case "session.created":
            if (p.info?.parentID) subagents.add(p.info.id);
            break;
          case "message.updated":
            if (p.info?.role === "assistant") assistantMessages.add(p.info.id);
            break;
          case "message.part.updated": {
            const part = p.part;
            const turn = part && turns.get(part.sessionID);
            if (turn && part.type === "text" && !part.synthetic) {
              turn.parts.set(part.id, { message: part.messageID, text: text(part.text) });
            }
            break;
          }
          case "session.idle": {
            const turn = turns.get(p.sessionID);
            if (!turn || turn.stored) return;
            turn.stored = true;
            const answer = [...turn.parts.values()]
              .filter((t) => assistantMessages.has(t.message))
              .map((t) => t.text)
              .join("\n")
              .trim();
            tell("hook-stop", {
              hook_event_name: "session.idle",
              session_id: p.sessionID,
              prompt: turn.prompt,
              last_assistant_message: answer,
              score_call_seen: turn.scored,
              cwd,
              project_dir: projectDir,
            });
            break;
          }
          case "session.deleted":
            turns.delete(p.info?.id);
            subagents.delete(p.info?.id);
            break;
        }
      } catch {
        // Fail open.
      }
    },
  };
};
