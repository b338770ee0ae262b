// How sizes and counts read in the viewer: the same rule as toolfold/_units.py
// (IEC units; one decimal below 10 of a unit, a whole number from 10 on).
"use strict";
(function () {
  const UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB"];

  function group(n) {
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }

  // Integer arithmetic (BigInt), rounding half up, exactly as the Python formatter.
  function formatBytes(n) {
    if (n < 0) return "-" + formatBytes(-n);
    if (n < 1024) return n + " B";
    const b = BigInt(Math.round(n));
    for (let i = 0; i < UNITS.length; i++) {
      const d = 1024n ** BigInt(i + 1);
      const tenths = (20n * b + d) / (2n * d);
      if (tenths < 100n) return (tenths / 10n) + "." + (tenths % 10n) + " " + UNITS[i];
      const whole = (2n * b + d) / (2n * d);
      if (whole < 1024n || i === UNITS.length - 1) return group(whole) + " " + UNITS[i];
    }
    return n + " B";
  }

  function plural(count, word, words) {
    return group(count) + " " + (count === 1 ? word : (words || word + "s"));
  }

  window.toolfoldUnits = { formatBytes, plural };
})();
