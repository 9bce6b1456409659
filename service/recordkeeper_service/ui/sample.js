// A version's sample records: the first records of each split, decoded by the client that
// published the version (the service never reads shards), as a table per split.
import { api, seg } from "./api.js";
import { bytes, h, table, when } from "./dom.js";

/** The version's sample (GET /versions/{name}/sample), or null when it has none. */
export async function fetchSample(versionName) {
  try {
    return await api(`/versions/${seg(versionName)}/sample`);
  } catch (error) {
    if (error.code === "sample_not_found") return null;
    throw error;
  }
}

/** A feature's values as one cell: one value bare, several as a list written as
 * `recordkeeper head` writes it, `[0.25, 0.5]` — with spaces, so a long list wraps inside its
 * cell instead of pushing the record's other features out of view. */
function valuesText(values) {
  if (Array.isArray(values) && values.length === 1 && !Array.isArray(values[0])) return String(values[0]);
  if (!Array.isArray(values)) return JSON.stringify(values);
  // "…" ends a list the sample cut at 50 values: shown bare, it is no value of the record
  const item = (v) => (Array.isArray(v) ? valuesText(v) : v === "…" ? "…" : JSON.stringify(v));
  return `[${values.map(item).join(", ")}]`;
}

// A feature's cell asks the record's own features (Object.hasOwn): `name in features` also
// finds Object.prototype's toString, constructor and __proto__ on a record that lacks them.
function splitTable(split, records) {
  const names = [];
  for (const record of records) {
    if (record.kind !== "example") continue;
    for (const name of Object.keys(record.features)) if (!names.includes(name)) names.push(name);
  }
  const columns = [
    ["#", (r) => String(r.index)],
    ["Size", (r) => bytes(r.size)],
    ...names.map((name) => [
      h("code", {}, name),
      (r) => (r.kind === "example" ? (Object.hasOwn(r.features, name) ? h("span", { class: "sample-value" }, valuesText(r.features[name])) : "—") : ""),
    ]),
  ];
  if (records.some((r) => r.kind === "bytes")) columns.push(["Record (not an Example)", (r) => (r.kind === "bytes" ? h("code", {}, r.features) : "")]);
  return h(
    "section",
    { class: "sample-split" },
    h("h3", {}, `Split ${split}: first ${records.length} record${records.length === 1 ? "" : "s"}`),
    records.length ? table(columns, records, { testid: `sample-${split}` }) : h("p", { class: "muted" }, "No records."),
  );
}

/** The "Sample records" section's body: the tables, or how to record a sample. */
export function sampleSection(versionName, sample) {
  if (!sample) {
    return h(
      "p",
      { class: "muted", "data-testid": "sample-none" },
      "No sample records were recorded for this version (publishing records them; it was published before, or with sampling off). ",
      h("code", {}, `recordkeeper head ${versionName}`),
      " shows its first records; ",
      h("code", {}, `recordkeeper head ${versionName} --record-sample`),
      " stores them here.",
    );
  }
  const how = sample.source === "publish" ? "while publishing it" : "after it was committed (recordkeeper head --record-sample)";
  return h(
    "div",
    { "data-testid": "sample" },
    h(
      "p",
      { class: "muted", "data-testid": "sample-note" },
      `Recorded by the publisher (${sample.recorded_by}) ${how}, ${when(sample.recorded_at)}: the service never reads shards. `,
      "Values are decoded as recordkeeper head shows them: long text is cut, binary values are shown as a hex prefix.",
    ),
    sample.splits.map((s) => splitTable(s.split, s.records)),
  );
}
