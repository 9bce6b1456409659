// The compare page's record sections: which records each version holds, from what the registry
// knows (the split set digests `recordkeeper index` registers), and the record diff a client
// computed from the versions' record indexes and stored (the service never reads storage).
import { api, seg } from "./api.js";
import { count, counted, errorBox, h, table, when } from "./dom.js";

/** The versions' record identities and the stored record diffs of old → new, fetched together;
 * a failure is kept and shown in its section (the rest of the page stands). */
export async function fetchRecords(oldName, newName) {
  const settle = (promise) => promise.then((value) => ({ value }), (error) => ({ error }));
  const [oldSets, newSets, diffs] = await Promise.all([
    settle(api(`/versions/${seg(oldName)}/record-sets`)),
    settle(api(`/versions/${seg(newName)}/record-sets`)),
    settle(api(`/versions/${seg(oldName)}/record-diffs/${seg(newName)}`)),
  ]);
  return { oldSets, newSets, diffs };
}

const identity = (set) => `${set.kind}/${set.width}`;

/** The identity both versions were indexed with (bytes/16 first, as the CLI's default), or null. */
function sharedIdentity(oldSets, newSets) {
  const theirs = new Set(newSets.map(identity));
  const shared = oldSets.filter((s) => theirs.has(identity(s)));
  shared.sort((a, b) => (identity(a) === "bytes/16" ? -1 : identity(b) === "bytes/16" ? 1 : identity(a) < identity(b) ? -1 : 1));
  return shared.length ? identity(shared[0]) : null;
}

const indexCommand = (name) => h("code", { class: "command" }, `recordkeeper index ${name}`);

/** One split's state: same records (and whether its shards changed), other records, or why
 * the registry cannot tell. */
function splitState(split, oldSet, newSet, shardsChanged) {
  const a = oldSet && oldSet.splits.find((s) => s.split === split);
  const b = newSet && newSet.splits.find((s) => s.split === split);
  if (oldSet && newSet) {
    if (!a) return h("span", { class: "plus" }, "new split");
    if (!b) return h("span", { class: "minus" }, "split removed");
    if (a.digest !== b.digest) return h("span", { class: "records-differ" }, "different records");
    return shardsChanged(split) ? h("span", { class: "ok" }, "same records, resharded") : h("span", { class: "ok" }, "same records");
  }
  return h("span", { class: "muted" }, "not comparable: a side is not indexed");
}

function sideCell(name, set, sets, split, hasSplit) {
  if (!hasSplit) return h("span", { class: "muted" }, "—");
  if (!set && sets.length) return h("span", { class: "muted" }, `indexed as ${sets.map(identity).join(", ")} only`);
  if (!set) return h("span", { class: "not-indexed" }, "not indexed: ", indexCommand(name));
  const entry = set.splits.find((s) => s.split === split);
  return entry ? h("span", { title: entry.digest }, `indexed · ${counted(entry.records, "record")}`) : "—";
}

/** "Records": per split, whether each side has record identity and whether the records are the
 * same (equal split set digests), whatever the sharding. */
export function recordsSection(diff, records, changes) {
  const { oldSets, newSets } = records;
  if (oldSets.error || newSets.error) return errorBox(oldSets.error || newSets.error);
  const shared = sharedIdentity(oldSets.value.data, newSets.value.data);
  const pick = (sets) => (shared ? sets.find((s) => identity(s) === shared) : null);
  const oldSet = pick(oldSets.value.data);
  const newSet = pick(newSets.value.data);
  // a side's own identity when the other side has none to compare with
  const own = (sets, other) => (other.length ? null : sets.find((s) => identity(s) === "bytes/16") || sets[0] || null);
  const oldShown = oldSet || own(oldSets.value.data, newSets.value.data);
  const newShown = newSet || own(newSets.value.data, oldSets.value.data);
  const changedSplits = new Set(changes.map((c) => c.split));
  const shardsChanged = (split) => changedSplits.has(split) || (diff.shards.more && !diff.same_content);
  const splits = Object.keys(diff.splits).sort();
  const oldHas = (s) => diff.splits[s].old_shards > 0;
  const newHas = (s) => diff.splits[s].new_shards > 0;
  const missing = [
    [diff.old, oldSets.value.data],
    [diff.new, newSets.value.data],
  ].filter(([, sets]) => !sets.length);
  let summary;
  if (oldSet && newSet && oldSet.records_digest === newSet.records_digest) {
    summary = h(
      "p",
      { class: "ok", "data-testid": "records-summary" },
      diff.same_content ? "Same records (same content)." : "Same records, resharded: equal records digests, different content digests.",
    );
  } else if (oldSet && newSet) {
    summary = h("p", { "data-testid": "records-summary" }, `Different records (${shared} identities; records digests differ).`);
  } else if (missing.length) {
    summary = h(
      "p",
      { class: "muted", "data-testid": "records-summary" },
      missing.map(([name], i) => [i ? " and " : "", h("code", {}, name)]),
      missing.length > 1 ? " have" : " has",
      " no record identity yet: ",
      missing.map(([name], i) => [i ? ", then " : "", indexCommand(name)]),
      " indexes it (one read of each shard; a version written or published with record identity on needs nothing).",
    );
  } else {
    const kinds = (sets) => sets.map(identity).join(", ");
    summary = h(
      "p",
      { class: "muted", "data-testid": "records-summary" },
      `Indexed with different identities (${kinds(oldSets.value.data)} vs ${kinds(newSets.value.data)}): not comparable.`,
    );
  }
  return h(
    "div",
    { class: "records-identity" },
    summary,
    table(
      [
        ["Split", (s) => s],
        ["From", (s) => sideCell(diff.old, oldShown, oldSets.value.data, s, oldHas(s))],
        ["To", (s) => sideCell(diff.new, newShown, newSets.value.data, s, newHas(s))],
        ["Records", (s) => splitState(s, oldSet, newSet, shardsChanged)],
      ],
      splits,
      { testid: "records-splits" },
    ),
  );
}

const signed = (n, sign, cls) => (n ? h("span", { class: cls }, `${sign}${count(n)}`) : h("span", { class: "muted" }, "0"));

function samples(split) {
  const rows = [
    ...split.sample_added.map((id) => h("li", { class: "plus" }, "+ ", h("code", { class: "identity" }, id))),
    ...split.sample_removed.map((id) => h("li", { class: "minus" }, "- ", h("code", { class: "identity" }, id))),
  ];
  if (!rows.length) return null;
  return h(
    "div",
    { class: "record-samples", "data-testid": `record-samples-${split.split}` },
    h("h4", {}, `${split.split}: sample identities`),
    h("ul", { class: "identities" }, rows),
  );
}

/** "Record diff": the stored diff (per split counts, sample identities, who computed it and
 * when), or the command that computes it. */
export function recordDiffSection(diff, records) {
  const { diffs, oldSets, newSets } = records;
  if (diffs.error) return errorBox(diffs.error);
  const command = h("code", { class: "command" }, `recordkeeper diff ${diff.old} ${diff.new} --records`);
  if (!diffs.value.count) {
    const unindexed = [oldSets, newSets].some((s) => s.value && !s.value.data.length);
    return h(
      "p",
      { class: "muted", "data-testid": "record-diff-none" },
      "No record diff is stored for this pair. ",
      command,
      unindexed ? " computes it once both versions are indexed" : " computes it from both versions' record indexes",
      " and, with a token allowed to write, stores it here.",
    );
  }
  const stored = diffs.value.data[0];
  return h(
    "div",
    { class: "record-diff" },
    h(
      "p",
      { "data-testid": "record-diff-meta" },
      stored.identical
        ? h("span", { class: "ok" }, "No record added or removed: the same records in every split.")
        : [
            `${count(stored.new)} new to `,
            h("code", {}, stored.b),
            `, ${count(stored.gone)} gone from `,
            h("code", {}, stored.a),
            " (distinct identities, in no split of the other version).",
          ],
    ),
    h(
      "p",
      { class: "muted", "data-testid": "record-diff-by" },
      `Computed by ${stored.recorded_by} at ${when(stored.recorded_at)} from ${stored.kind}/${stored.width} record identities: `,
      command,
    ),
    table(
      [
        ["Split", (s) => s.split],
        ["From", (s) => count(s.records_a)],
        ["To", (s) => count(s.records_b)],
        ["Added", (s) => signed(s.added, "+", "plus")],
        ["Removed", (s) => signed(s.removed, "-", "minus")],
        ["Common", (s) => count(s.common)],
        ["Moved in", (s) => count(s.moved_in)],
        ["Moved out", (s) => count(s.moved_out)],
        ["Duplicates", (s) => `${count(s.duplicates_a)} → ${count(s.duplicates_b)}`],
      ],
      stored.splits,
      { testid: "record-diff" },
    ),
    stored.splits.map(samples),
    diffs.value.count > 1 ? h("p", { class: "muted" }, `Also stored with ${diffs.value.data.slice(1).map((d) => `${d.kind}/${d.width}`).join(", ")} identities.`) : null,
  );
}
