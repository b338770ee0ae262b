// chord.js — Chord wire decoder and six-verb applier for browser replicas.
//
// This is the "page of code in any language" of the Chord protocol
// (docs/protocol.md): decode (interned path ids, omitted paths) and apply
// (r s d a t p m) with the same validation as toolfold.chord. Strings are
// JavaScript strings, so `t` counts UTF-16 code units natively.
//
// Ops are untrusted input: the worst a forged batch may do is produce a wrong
// replica value. Every failure is a ChordError subclass; `apply` is atomic (an
// undo log restores the value when any op of the batch fails) and `decode`
// leaves the decoder's tables unchanged when it throws.
"use strict";

(function (root) {
  class ChordError extends Error {
    constructor(message) { super(message); this.name = "ChordError"; }
  }
  // A malformed op: unknown verb, wrong arity, wrong field type (the TypeScript
  // reference throws TypeError for these).
  class ShapeError extends ChordError {
    constructor(message) { super(message); this.name = "ShapeError"; }
  }
  // A payload that is no replicable value: nested deeper than MAX_DEPTH (counted
  // from the replica's root), or a string / key holding a lone surrogate.
  class JSONValueError extends ShapeError {
    constructor(message, path) { super(message); this.name = "JSONValueError"; this.path = path; }
  }
  class PathError extends ChordError {
    constructor(message, path) { super(message); this.name = "PathError"; this.path = path; }
  }
  class UnsafePathError extends ChordError {
    constructor(message, segment) { super(message); this.name = "UnsafePathError"; this.segment = segment; }
  }

  // Every JavaScript replica walks paths with obj[key]; these would reach the
  // prototype chain, so they are refused anywhere in a path.
  const RESERVED = new Set(["__proto__", "constructor", "prototype"]);
  const VERBS = new Set(["r", "s", "d", "a", "t", "p", "m"]);
  const hasOwn = Object.prototype.hasOwnProperty;

  // The same bounds as toolfold.chord (docs/protocol.md, "Values"): integer fields
  // are safe integers (beyond 2**53 - 1 a double no longer holds every integer, so
  // Python and JavaScript would address different slots: 1e21 is the key "1e+21"
  // here), and a replica nests at most MAX_DEPTH containers.
  const MAX_DEPTH = 250;
  const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

  function isIndex(x) {
    return typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
  }

  // Check a payload about to be written `depth` containers deep: strings and keys
  // must be valid Unicode, nesting stays within MAX_DEPTH. (Numbers beyond the safe
  // integers cannot be told apart from floats once parsed; producers never send them.)
  function checkPayload(v, depth, path) {
    if (typeof v === "string") {
      if (LONE_SURROGATE.test(v)) throw new JSONValueError("lone surrogate in a string at " + show(path), path);
      return;
    }
    if (v === null || typeof v !== "object") return;
    if (depth >= MAX_DEPTH) {
      throw new JSONValueError("containers are nested deeper than " + MAX_DEPTH + " levels at " + show(path), path);
    }
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) checkPayload(v[i], depth + 1, path);
      return;
    }
    for (const k of Object.keys(v)) {
      if (LONE_SURROGATE.test(k)) throw new JSONValueError("lone surrogate in a key at " + show(path), path);
      checkPayload(v[k], depth + 1, path);
    }
  }

  function isPlainObject(x) {
    return x !== null && typeof x === "object" && !Array.isArray(x);
  }

  function show(x) {
    try { return JSON.stringify(x); } catch (_e) { return String(x); }
  }

  function checkPath(path) {
    if (!Array.isArray(path)) throw new ShapeError("path is not an array: " + show(path));
    for (const seg of path) {
      if (typeof seg === "string") {
        if (RESERVED.has(seg)) throw new UnsafePathError("unsafe path segment: " + seg, seg);
      } else if (!isIndex(seg)) {
        throw new UnsafePathError("unsafe path segment: " + show(seg), seg);
      }
    }
  }

  function checkPerm(perm) {
    if (!Array.isArray(perm)) throw new ShapeError("m permutation is not an array");
    const seen = new Uint8Array(perm.length);
    for (const i of perm) {
      if (!isIndex(i) || i >= perm.length || seen[i]) {
        throw new ShapeError("m permutation is not a bijection");
      }
      seen[i] = 1;
    }
  }

  // Arity of the long (inline path or id) form of each verb; the short form
  // (path omitted, same as the previous op of the batch) has one element less.
  const LONG_ARITY = { s: 3, d: 2, a: 3, t: 3, p: 5, m: 3 };

  // Validate one wire op (ids, short forms and "#" allowed).
  function validateWireOp(op) {
    if (!Array.isArray(op) || op.length === 0) throw new ShapeError("op is not a tuple: " + show(op));
    const verb = op[0];
    if (verb === "#") {
      if (op.length !== 3 || !isIndex(op[1]) || !Array.isArray(op[2])) throw new ShapeError("# shape");
      checkPath(op[2]);
      return;
    }
    if (!VERBS.has(verb)) throw new ShapeError("unknown op verb: " + String(verb));
    if (verb === "r") {
      if (op.length !== 2) throw new ShapeError("r arity");
      return;
    }
    const long = LONG_ARITY[verb];
    if (op.length !== long && op.length !== long - 1) throw new ShapeError(verb + " arity");
    let i = 1;
    if (op.length === long) {
      const ref = op[1];
      if (!isIndex(ref)) checkPath(ref);
      i = 2;
    }
    checkArgs(verb, op, i);
  }

  function checkArgs(verb, op, i) {
    switch (verb) {
      case "a":
        if (typeof op[i] !== "string") throw new ShapeError("a value");
        break;
      case "t":
        if (!isIndex(op[i])) throw new ShapeError("t count");
        break;
      case "p":
        if (!isIndex(op[i])) throw new ShapeError("p index");
        if (!isIndex(op[i + 1])) throw new ShapeError("p remove");
        if (!Array.isArray(op[i + 2])) throw new ShapeError("p items");
        break;
      case "m":
        checkPerm(op[i]);
        break;
      default:
        break;
    }
  }

  // Validate one decoded op (long forms only, inline paths, no "#").
  function validateOp(op) {
    if (!Array.isArray(op) || op.length === 0) throw new ShapeError("op is not a tuple: " + show(op));
    const verb = op[0];
    if (!VERBS.has(verb)) throw new ShapeError("unknown op verb: " + String(verb));
    if (verb === "r") {
      if (op.length !== 2) throw new ShapeError("r arity");
      return;
    }
    if (op.length !== LONG_ARITY[verb]) throw new ShapeError(verb + " arity");
    checkPath(op[1]);
    if (op[1].length === 0 && verb !== "p" && verb !== "m") {
      throw new ShapeError("path is empty: " + verb + " needs a non-empty path (use r to replace the root)");
    }
    checkArgs(verb, op, 2);
  }

  function isBase(batch) {
    return Array.isArray(batch) && batch.length > 0 && Array.isArray(batch[0]) && batch[0][0] === "r";
  }

  // One Decoder per stream (per subscription). Ids are interned paths; "r"
  // resets the table; the previous path resets at every batch start.
  class Decoder {
    constructor() { this.ids = new Map(); }

    decode(wire) {
      if (!Array.isArray(wire)) throw new ShapeError("wire is not iterable");
      // Work on a copy of the id table so a failed batch cannot poison it.
      let ids = new Map(this.ids);
      let prev = null;
      const out = [];
      for (const op of wire) {
        validateWireOp(op);
        const verb = op[0];
        if (verb === "#") {
          ids.set(op[1], op[2].slice());
          continue;
        }
        if (verb === "r") {
          ids = new Map();
          prev = null;
          out.push(["r", op[1]]);
          continue;
        }
        let path;
        let rest;
        if (op.length === LONG_ARITY[verb]) {
          const ref = op[1];
          if (isIndex(ref)) {
            if (!ids.has(ref)) throw new PathError("unresolvable path: " + ref, ref);
            path = ids.get(ref);
          } else {
            path = ref;
          }
          rest = op.slice(2);
        } else {
          if (prev === null) throw new PathError("unresolvable path: []", []);
          path = prev;
          rest = op.slice(1);
        }
        if (path.length === 0 && verb !== "p" && verb !== "m") {
          throw new PathError("unresolvable path: []", []);
        }
        prev = path;
        const decoded = [verb, path.slice(), ...rest];
        validateOp(decoded);
        out.push(decoded);
      }
      this.ids = ids;
      return out;
    }
  }

  // JSON payloads are checked, then copied into the replica, never aliased with an op.
  // `depth`: how many containers enclose the place the payload is written to.
  function clone(v, depth, path) {
    checkPayload(v, depth, path);
    if (v === null || typeof v !== "object") return v;
    return JSON.parse(JSON.stringify(v));
  }

  function walk(rootValue, path, upto) {
    let node = rootValue;
    for (let i = 0; i < upto; i++) {
      const seg = path[i];
      if (Array.isArray(node)) {
        if (typeof seg !== "number" || seg >= node.length) {
          throw new PathError("unresolvable path: " + show(path.slice(0, i + 1)), path.slice(0, i + 1));
        }
        node = node[seg];
      } else if (isPlainObject(node) && hasOwn.call(node, String(seg))) {
        // An integer segment on an object addresses the key of its decimal
        // text (obj[0] is obj["0"]), as in the Python applier.
        node = node[String(seg)];
      } else {
        throw new PathError("unresolvable path: " + show(path.slice(0, i + 1)), path.slice(0, i + 1));
      }
    }
    return node;
  }

  function unresolvable(path) {
    return new PathError("unresolvable path: " + show(path), path);
  }

  // Read the string at parent[key] (for a and t).
  function stringAt(parent, key, path) {  // -> [slot, string]
    if (Array.isArray(parent)) {
      if (typeof key !== "number") throw unresolvable(path);
      if (key >= parent.length) throw new UnsafePathError("unsafe path segment: " + key, key);
    } else if (!isPlainObject(parent) || !hasOwn.call(parent, String(key))) {
      throw unresolvable(path);
    } else {
      key = String(key);
    }
    const s = parent[key];
    if (typeof s !== "string") throw new PathError("not a string at " + show(path), path);
    return [key, s];
  }

  // Apply decoded ops to `target` atomically; returns the new value (a root
  // "r" replaces it). On any error the target is restored and the error is
  // rethrown.
  function apply(target, ops) {
    if (!Array.isArray(ops)) throw new ShapeError("batch is not a list of ops");
    let value = target;
    const undo = [];
    try {
      for (const op of ops) {
        validateOp(op);
        value = applyOne(value, op, undo);
      }
    } catch (err) {
      for (let i = undo.length - 1; i >= 0; i--) undo[i]();
      if (err instanceof ChordError) throw err;
      throw new ChordError("apply failed: " + (err && err.message ? err.message : String(err)));
    }
    return value;
  }

  // Array.prototype.splice with the items as an array (spreading a large
  // payload into arguments can overflow the engine's argument limit).
  function spliceIn(arr, index, remove, items) {
    const end = Math.min(arr.length, index + remove);
    const removed = arr.slice(index, end);
    const tail = arr.slice(end);
    arr.length = index;
    for (const x of items) arr.push(x);
    for (const x of tail) arr.push(x);
    return removed;
  }

  function applyOne(value, op, undo) {
    const verb = op[0];
    if (verb === "r") return clone(op[1], 0, []);
    const path = op[1];
    if (verb === "p" || verb === "m") {
      const arr = walk(value, path, path.length);
      if (!Array.isArray(arr)) throw new PathError("not an array at " + show(path), path);
      if (verb === "p") {
        // The items stand where the array stands: path.length containers enclose it.
        const items = clone(op[4], path.length, path);
        const index = Math.min(op[2], arr.length);
        const removed = spliceIn(arr, index, op[3], items);
        undo.push(() => { spliceIn(arr, index, items.length, removed); });
      } else {
        const perm = op[2];
        if (perm.length !== arr.length) {
          throw new ShapeError("m permutation has " + perm.length + " entries but the array at " + show(path) + " has " + arr.length);
        }
        const old = arr.slice();
        for (let i = 0; i < perm.length; i++) arr[i] = old[perm[i]];
        undo.push(() => { for (let i = 0; i < old.length; i++) arr[i] = old[i]; });
      }
      return value;
    }
    const parent = walk(value, path, path.length - 1);
    const key = path[path.length - 1];
    if (verb === "s") {
      const v = clone(op[2], path.length, path);
      if (Array.isArray(parent)) {
        if (typeof key !== "number") throw unresolvable(path);
        if (key > parent.length) throw new UnsafePathError("unsafe path segment: " + key, key);
        if (key === parent.length) {
          parent.push(v);
          undo.push(() => { parent.pop(); });
        } else {
          const old = parent[key];
          parent[key] = v;
          undo.push(() => { parent[key] = old; });
        }
      } else if (isPlainObject(parent)) {
        const key = String(path[path.length - 1]);
        const had = hasOwn.call(parent, key);
        const old = parent[key];
        parent[key] = v;
        undo.push(() => { if (had) parent[key] = old; else delete parent[key]; });
      } else {
        throw unresolvable(path);
      }
      return value;
    }
    if (verb === "d") {
      if (Array.isArray(parent)) {
        if (typeof key !== "number") throw unresolvable(path);
        if (key >= parent.length) throw new UnsafePathError("unsafe path segment: " + key, key);
        const old = parent.splice(key, 1);
        undo.push(() => { parent.splice(key, 0, old[0]); });
      } else if (isPlainObject(parent)) {
        const key = String(path[path.length - 1]);
        if (hasOwn.call(parent, key)) {
          const old = parent[key];
          delete parent[key];
          undo.push(() => { parent[key] = old; });
        }
      } else {
        throw unresolvable(path);
      }
      return value;
    }
    // a, t
    const [k, s] = stringAt(parent, key, path);
    if (verb === "a") checkPayload(op[2], path.length, path);
    const next = verb === "a" ? s + op[2] : s.slice(op[2]);
    parent[k] = next;
    undo.push(() => { parent[k] = s; });
    return value;
  }

  // A replica: one decoder and the folded value. `fold` throws a ChordError
  // when a batch cannot decode or apply; the caller then drops the replica and
  // resubscribes (there is no resume).
  class Replica {
    constructor() { this.decoder = new Decoder(); this.value = null; this.batches = 0; }
    fold(wire) {
      const ops = this.decoder.decode(wire);
      this.value = apply(this.value, ops);
      this.batches += 1;
      return this.value;
    }
  }

  root.Chord = {
    ChordError, ShapeError, JSONValueError, PathError, UnsafePathError, MAX_DEPTH,
    Decoder, Replica, apply, validateOp, validateWireOp, isBase, RESERVED,
  };
})(typeof window !== "undefined" ? window : globalThis);
