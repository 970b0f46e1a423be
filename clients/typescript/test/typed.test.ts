/**
 * Typed proxies by default: `client.agent(id)` is typed by the declarations generated from the
 * server's schema (`src/endpoints.ts`), so the DSH calls are checked by tsc and their results
 * carry the DSH interfaces, against a real server.
 */

import assert from "node:assert/strict";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  type Client,
  connect,
  type DynamicServices,
  type Endpoints,
  type FileReferenceCandidate,
  parseSessionReferenceText,
  type PreparedReferencedMessage,
  SessionReferenceError,
  type SessionReferenceErrorCode,
  type SessionReferenceMentionCandidate,
  type WireValue,
} from "../src/index.js";
import { type Server, startServer } from "./server.js";

let server: Server;
let client: Client;
let source: string;
let target: string;
let work: string;

before(async () => {
  server = await startServer();
  client = await connect(server.endpoint, { name: "ts-typed-test" });
  work = join(server.dir, "work");
  mkdirSync(join(work, "src"), { recursive: true });
  writeFileSync(join(work, "src", "main.ts"), "export {};\n");
  const services = client.services();
  source = (await services.sessions.create(work)).sessionId;
  await client.agent(source).sessions.setTitle("Source");
  await client.agent(source).sessions.append([
    {
      type: "user/message",
      data: {
        id: "m1",
        role: "user",
        content: [{ type: "text", text: "hello from the source" }],
        source: { kind: "user" },
      },
      surfaceOp: "append",
    },
  ]);
  target = (await services.sessions.create(work)).sessionId;
});

after(async () => {
  await client?.close();
  await server?.stop();
});

describe("typed proxies", () => {
  test("candidates(query, {signal}) is typed SessionReferenceMentionCandidate[]", async () => {
    const agent = client.agent(target);
    const candidates: SessionReferenceMentionCandidate[] =
      await agent.sessionReferenceResolver.candidates("", {
        signal: new AbortController().signal,
      });
    assert.equal(candidates.length, 1);
    const [candidate] = candidates;
    assert.ok(candidate !== undefined);
    const sameWorkspace: boolean = candidate.sameWorkspace;
    const createdAt: number = candidate.createdAt;
    const displayTitle: string | undefined = candidate.displayTitle;
    assert.equal(candidate.sessionId, source);
    assert.equal(candidate.label, "Source");
    assert.equal(displayTitle, "Source");
    assert.equal(sameWorkspace, true);
    assert.ok(Number.isSafeInteger(createdAt));
    assert.deepEqual(parseSessionReferenceText(candidate.mention).references, [
      { sessionId: source, label: "Source" },
    ]);
    // Options in the place of the optional query, as at run time.
    assert.deepEqual(
      (await agent.sessionReferenceResolver.candidates({ timeoutMs: 10_000 })).map(
        (c) => c.sessionId,
      ),
      [source],
    );
  });

  test("fileReferences.list(query) is typed FileReferenceCandidate[] with a literal kind", async () => {
    const files: FileReferenceCandidate[] = await client.agent(target).fileReferences.list("src/");
    const kinds: ("file" | "directory")[] = files.map((file) => file.kind);
    assert.deepEqual(
      files.map((file) => file.path),
      ["src/main.ts"],
    );
    assert.deepEqual(kinds, ["file"]);
  });

  test("prepare(content, references) is typed PreparedReferencedMessage", async () => {
    const prepared: PreparedReferencedMessage = await client
      .agent(target)
      .sessionReferenceResolver.prepare(
        [{ type: "text", text: "see @Source" }],
        [{ sessionId: source, label: "Source" }],
        { timeoutMs: 10_000 },
      );
    assert.deepEqual(prepared.content, [{ type: "text", text: "see @Source" }]);
    const context = prepared.additionalContext;
    assert.ok(context !== undefined);
    const role: "user" = context.role;
    const version: 1 = context.source.version;
    const reference = context.source.references[0];
    assert.ok(reference !== undefined);
    const capturedThroughSeq: number | null = reference.capturedThroughSeq;
    const truncated: boolean = reference.truncated;
    assert.equal(role, "user");
    assert.equal(version, 1);
    assert.equal(context.source.kind, "session-reference");
    assert.equal(reference.sessionId, source);
    assert.equal(reference.label, "Source");
    assert.equal(reference.inputIndex, 0);
    assert.equal(typeof capturedThroughSeq, "number");
    assert.equal(truncated, false);
    const [block] = context.content;
    assert.ok(block !== undefined && block.type === "text");
    assert.match(block.text, /hello from the source/);
  });

  test("prepare's own error codes are in its declared errors", async () => {
    const self = client
      .agent(target)
      .sessionReferenceResolver.prepare("x", [{ sessionId: target }]);
    await assert.rejects(self, (error: unknown) => {
      assert.ok(error instanceof SessionReferenceError);
      const code: SessionReferenceErrorCode = "SESSION_REFERENCE_SELF_REFERENCE";
      assert.equal(error.code, code);
      return true;
    });
    const declared: Endpoints["sessionReferenceResolver/prepare"]["errors"] =
      "SESSION_REFERENCE_SELF_REFERENCE";
    const spec = (await client.describe()).endpoints.get("sessionReferenceResolver/prepare");
    assert.ok(spec?.errors.includes(declared));
  });

  test("tsc rejects wrong arguments and result uses; DynamicServices stays untyped", async () => {
    const agent = client.agent(target);
    // Checked by tsc, never run.
    void (() => {
      // @ts-expect-error query is a string
      void agent.fileReferences.list(42);
      // @ts-expect-error references are required
      void agent.sessionReferenceResolver.prepare("text");
      // @ts-expect-error a reference's label is a string
      void agent.sessionReferenceResolver.prepare("text", [{ sessionId: "s", label: 1 }]);
      // @ts-expect-error the agent proxy fills agentId itself
      void agent.fileReferences.list(target, "src/");
      // @ts-expect-error no such namespace
      void agent.nope.nothing();
      void (async () => {
        const [first] = await agent.sessionReferenceResolver.candidates();
        // @ts-expect-error sameWorkspace is a boolean
        const wrong: string = first!.sameWorkspace;
        void wrong;
      })();
    });
    const untyped = client.agent<DynamicServices>(target);
    const echoed: WireValue = await untyped.diagnostics.echo({ any: ["shape"] });
    assert.deepEqual(echoed, { any: ["shape"] });
  });
});
