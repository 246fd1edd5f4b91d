(function () {
  "use strict";

  // Everything from the trace reaches the page through textContent or
  // createTextNode, never through an HTML parser: trace text is untrusted.

  var FIRST_ITEMS = 40;
  var CHUNK_ITEMS = 80;
  var PREVIEW_CHARS = 1200;
  var PREVIEW_LINES = 16;
  // Long text without break opportunities (one 100,000-character word, in a
  // script that needs shaping such as Arabic) costs the browser seconds to
  // lay out, growing with the square of its length. So what is drawn is
  // capped (a "show all" control draws the rest), and long text is drawn in
  // pieces of at most PIECE_CHARS, cut after a space where there is one, or
  // else at an explicit break opportunity (<wbr>): layout stays linear.
  var INLINE_CHARS = 160;      // names, ids, models, chips, header values
  var EXPANDED_CHARS = 100000; // a text block after "Show more"
  var TITLE_CHARS = 300;       // tooltips
  var PIECE_CHARS = 400;
  var ROLES = { user: "User", assistant: "Assistant", system: "System", tool: "Tool" };
  var MD_ROLES = { user: true, assistant: true, system: true };  // whose text is drawn as Markdown

  var data;
  try {
    data = JSON.parse(document.getElementById("ststrace-data").textContent);
  } catch (e) {
    document.getElementById("list").appendChild(el("p", "none", "The trace data in this page could not be read."));
    return;
  }
  var header = isObject(data.header) ? data.header : {};
  var messages = Array.isArray(data.messages) ? data.messages : [];
  var source = isObject(data.source) ? data.source : {};
  // File line of each message; only files with blank lines need the table.
  var lineTable = Array.isArray(data.lines) && data.lines.length === messages.length ? data.lines : null;
  function lineOf(i) { return lineTable ? lineTable[i] : i + 2; }
  function indexOfLine(n) { return lineTable ? lineTable.indexOf(n) : n - 2; }

  var nf = new Intl.NumberFormat();
  var timeFmt = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  var dateTimeFmt = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit"
  });

  // ---- helpers ------------------------------------------------------------

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function isObject(v) { return v !== null && typeof v === "object" && !Array.isArray(v); }
  function str(v) {
    if (typeof v === "string") return v;
    if (v === undefined || v === null) return "";
    try { return JSON.stringify(v); } catch (e) { return String(v); }
  }
  function tsOf(m) {
    var t = m && m.timestamp;
    return typeof t === "number" && isFinite(t) ? t : null;
  }
  function isError(text) { return /^\s*Error:/.test(text); }
  function roleOf(m) { return isObject(m) && typeof m.role === "string" ? m.role : ""; }
  function roleClass(role) { return Object.prototype.hasOwnProperty.call(ROLES, role) ? role : "unknown"; }
  function plural(n, one, many) { return nf.format(n) + " " + (n === 1 ? one : (many || one + "s")); }
  function fmtDuration(ms) {
    if (ms < 0) return "-" + fmtDuration(-ms);
    if (ms < 1000) return Math.round(ms) + " ms";
    var s = ms / 1000;
    if (s < 60) return (s < 10 ? s.toFixed(2) : s.toFixed(1)) + " s";
    var m = Math.floor(s / 60);
    s = Math.floor(s - m * 60);
    if (m < 60) return m + "m " + (s < 10 ? "0" : "") + s + "s";
    var h = Math.floor(m / 60);
    m = m - h * 60;
    if (h < 48) return h + "h " + (m < 10 ? "0" : "") + m + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }
  function fmtBytes(n) {
    if (typeof n !== "number") return "";
    if (n < 1024) return nf.format(n) + " B";
    var units = ["KiB", "MiB", "GiB", "TiB"];
    var v = n, i = -1;
    do { v /= 1024; i++; } while (v >= 1024 && i < units.length - 1);
    return v.toFixed(v < 10 ? 1 : 0) + " " + units[i];
  }
  function safeDate(ms) {
    var d = new Date(ms);
    return isNaN(d.getTime()) ? null : d;
  }
  function timeEl(ms, withDate) {
    var d = safeDate(ms);
    var t = el("time", "time", d ? (withDate ? dateTimeFmt : timeFmt).format(d) : String(ms));
    if (d) {
      t.dateTime = d.toISOString();
      t.title = d.toISOString();
    }
    return t;
  }
  function prettyArgs(a) {
    if (typeof a !== "string") return { text: str(a), ok: false };
    if (a.trim() === "") return { text: "", ok: true };
    try {
      var v = JSON.parse(a);
      if (isObject(v) && Object.keys(v).length === 0) return { text: "{}", ok: true };
      return { text: JSON.stringify(v, null, 2), ok: true };
    } catch (e) {
      return { text: a, ok: false };
    }
  }
  function escapeRegExp(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }
  function clip(text, n) { return text.length <= n ? text : text.slice(0, n) + "\u2026"; }

  // Appends *text* in pieces short enough to lay out quickly (see PIECE_CHARS).
  function appendPieces(parent, text) {
    if (text.length <= PIECE_CHARS) {
      parent.appendChild(document.createTextNode(text));
      return;
    }
    var i = 0, n = text.length;
    while (i < n) {
      var end = Math.min(n, i + PIECE_CHARS);
      var hard = false;
      if (end < n) {
        var k = end;
        while (k > end - 80 && !/\s/.test(text.charAt(k - 1))) k--;
        if (k > end - 80) end = k; else hard = true;
        // Never split a surrogate pair.
        var c = text.charCodeAt(end - 1);
        if (hard && c >= 0xd800 && c <= 0xdbff) end--;
      }
      parent.appendChild(el("span", null, text.slice(i, end)));
      if (hard) parent.appendChild(document.createElement("wbr"));
      i = end;
    }
  }

  // An inline value (a model, a name, an id): at most INLINE_CHARS drawn, and
  // a control that shows the rest.
  function inline(tag, cls, value) {
    var text = String(value);
    var e = el(tag, cls);
    if (text.length <= INLINE_CHARS) {
      e.textContent = text;
      return e;
    }
    // One inner element holds the text: in a flex container (a chip), every
    // piece would otherwise become a flex item of its own.
    e.classList.add("capped");
    var val = el("span", "val", text.slice(0, INLINE_CHARS));
    e.appendChild(val);
    var btn = el("button", "show-all", "\u2026 show all \u00b7 " + plural(text.length, "char"));
    btn.type = "button";
    btn.title = "Show the whole value";
    btn.addEventListener("click", function (ev) {
      ev.stopPropagation();
      ev.preventDefault();
      val.textContent = "";
      btn.remove();
      e.classList.remove("capped");
      e.classList.add("shown-all");
      appendPieces(val, text);
    });
    e.appendChild(btn);
    return e;
  }

  // ---- pairing: each tool result is drawn under the call it answers -------

  var items = [];          // what the list shows, in file order
  var itemOfMessage = [];  // message index -> item index
  var callsById = new Map();
  var counts = { user: 0, assistant: 0, system: 0, tool: 0, other: 0 };
  var toolCalls = 0, toolResults = 0, errors = 0, orphans = 0;
  var models = new Map();
  var firstTs = null, lastTs = null;

  messages.forEach(function (m, i) {
    var role = roleOf(m);
    if (Object.prototype.hasOwnProperty.call(counts, role)) counts[role]++; else counts.other++;
    var ts = tsOf(m);
    if (ts !== null) {
      if (firstTs === null || ts < firstTs) firstTs = ts;
      if (lastTs === null || ts > lastTs) lastTs = ts;
    }
    if (isObject(m) && typeof m.model === "string" && m.model) models.set(m.model, (models.get(m.model) || 0) + 1);
    if (role === "tool") {
      toolResults++;
      var isErr = isError(str(m.content));
      if (isErr) errors++;
      var call = typeof m.toolCallId === "string" ? callsById.get(m.toolCallId) : undefined;
      if (call) {
        call.results.push(i);
        itemOfMessage[i] = call.item;
        if (isErr) items[call.item].error = true;
        return;
      }
      orphans++;
      itemOfMessage[i] = items.length;
      items.push({ i: i, calls: [], orphan: true, error: isErr, hay: null });
      return;
    }
    var item = { i: i, calls: [], orphan: false, error: false, hay: null };
    var idx = items.length;
    if (isObject(m) && Array.isArray(m.toolCalls)) {
      m.toolCalls.forEach(function (tc) {
        toolCalls++;
        var c = { tc: isObject(tc) ? tc : {}, owner: i, item: idx, results: [] };
        var id = c.tc.id;
        if (typeof id === "string" && !callsById.has(id)) callsById.set(id, c);
        item.calls.push(c);
      });
    }
    itemOfMessage[i] = idx;
    items.push(item);
  });
  var unanswered = 0;
  items.forEach(function (it) { it.calls.forEach(function (c) { if (!c.results.length) unanswered++; }); });

  // Branches of a message tree (llama.app) that are not the path shown: each
  // is drawn, collapsed, inside the entry of the last message it shares.
  var branchesAt = new Map();  // item index -> [branch]
  (Array.isArray(data.branches) ? data.branches : []).forEach(function (b) {
    if (!isObject(b) || !Array.isArray(b.messages) || !b.messages.length) return;
    var after = typeof b.after === "number" && b.after >= 0 && b.after < messages.length ? b.after : 0;
    var idx = itemOfMessage[after];
    if (idx === undefined) return;
    if (!branchesAt.has(idx)) branchesAt.set(idx, []);
    branchesAt.get(idx).push(b);
  });

  function renderBranch(b) {
    var det = el("details", "branch");
    var first = isObject(b.messages[0]) ? b.messages[0] : {};
    var what = roleOf(first) === "assistant" ? "another reply (regenerated)" : "another branch";
    det.appendChild(el("summary", null, "Not shown: " + what + " \u00b7 " + plural(b.messages.length, "message")));
    var filled = false;
    det.addEventListener("toggle", function () {
      if (!det.open || filled) return;
      filled = true;
      b.messages.forEach(function (m) {
        if (!isObject(m)) return;
        var row = el("div", "branch-msg role-" + roleClass(roleOf(m)));
        var head = el("div", "head");
        head.appendChild(el("span", "role", ROLES[roleOf(m)] || "no role"));
        if (typeof m.model === "string" && m.model) head.appendChild(inline("span", "model", m.model));
        row.appendChild(head);
        if (str(m.reasoningContent) !== "") row.appendChild(textBlock(str(m.reasoningContent), "mono", { i: null }));
        if (str(m.content) !== "") row.appendChild(textBlock(str(m.content), "", MD_ROLES[roleOf(m)] ? { i: null } : null));
        if (Array.isArray(m.toolCalls)) {
          m.toolCalls.forEach(function (tc) {
            var fn = isObject(tc) && isObject(tc.function) ? tc.function : {};
            row.appendChild(inline("div", "fn", "\u0192 " + str(fn.name) + " " + str(fn.arguments)));
          });
        }
        det.appendChild(row);
      });
    });
    return det;
  }

  // ---- state ----------------------------------------------------------------

  var state = { query: "", re: null, errorsOnly: false, expandAll: null };
  var view = items;
  var list = document.getElementById("list");
  var moreBar = document.getElementById("more");
  var statusEl = document.getElementById("status");
  var expanders = [];  // setters of the long-text blocks currently in the DOM

  function callName(c) {
    var fn = isObject(c.tc.function) ? c.tc.function : {};
    return typeof fn.name === "string" ? fn.name : str(fn.name);
  }
  function callArgs(c) {
    var fn = isObject(c.tc.function) ? c.tc.function : {};
    return fn.arguments;
  }

  function haystack(it) {
    if (it.hay !== null) return it.hay;
    var m = messages[it.i] || {};
    var parts = [roleOf(m), str(m.content), str(m.reasoningContent), str(m.model), str(m.toolCallId)];
    it.calls.forEach(function (c) {
      parts.push(callName(c), str(callArgs(c)), str(c.tc.id));
      c.results.forEach(function (j) { parts.push(str((messages[j] || {}).content)); });
    });
    it.hay = parts.join("\n").toLowerCase();
    return it.hay;
  }

  function matches(text) {
    if (!state.query) return false;
    return text.toLowerCase().indexOf(state.query) !== -1;
  }

  // ---- text blocks ----------------------------------------------------------

  function appendHighlighted(parent, text) {
    if (!state.re || !text) {
      appendPieces(parent, text);
      return;
    }
    var re = state.re;
    re.lastIndex = 0;
    var last = 0, m, guard = 0;
    while ((m = re.exec(text)) !== null && guard++ < 5000) {
      if (m[0] === "") { re.lastIndex++; continue; }
      if (m.index > last) appendPieces(parent, text.slice(last, m.index));
      parent.appendChild(el("mark", null, m[0]));
      last = m.index + m[0].length;
    }
    if (last < text.length) appendPieces(parent, text.slice(last));
  }

  function previewCut(text) {
    var cut = Math.min(text.length, PREVIEW_CHARS);
    var nl = -1, lines = 0;
    while (lines < PREVIEW_LINES) {
      nl = text.indexOf("\n", nl + 1);
      if (nl === -1 || nl >= cut) break;
      lines++;
    }
    if (lines >= PREVIEW_LINES && nl !== -1 && nl < cut) cut = nl;
    return cut;
  }

  function countLines(text, from) {
    var n = 1, i = from;
    while ((i = text.indexOf("\n", i) + 1) > 0) n++;
    return n;
  }

  // ---- Markdown -------------------------------------------------------------
  // User, assistant and system text and reasoning are drawn as Markdown. marked's
  // lexer (vendored, see vendor/README.md) turns the text into tokens, and the DOM
  // is built here from an allow-list of token types with createElement and text
  // nodes. marked's HTML renderer is never used, so no HTML string is ever
  // parsed: raw HTML in a trace is an `html` token and is drawn as the text it
  // is. Links go only to http(s) and mailto URLs, in a new tab, with no opener
  // and no referrer; images are never loaded, only linked. Tool results and
  // arguments stay raw: they are program output, rarely Markdown.

  // marked's inline parsing is quadratic in the worst case ("_a" repeated:
  // 5,000 chars in one paragraph take about 0.1 s, 20,000 about 1 s). So text
  // longer than MD_MAX_CHARS is drawn raw, and so is one run of inline text
  // (a paragraph, a heading, a table cell) longer than MD_INLINE_MAX_CHARS.
  var MD_MAX_CHARS = 50000;
  var MD_INLINE_MAX_CHARS = 5000;
  var Lexer = window.marked && typeof window.marked.Lexer === "function" ? window.marked.Lexer : null;
  var mdOptions = null;
  var ENTITIES = { amp: "&", lt: "<", gt: ">", quot: "\"", apos: "'", nbsp: "\u00a0" };

  function mdTokens(text) {
    if (!Lexer || text.length > MD_MAX_CHARS) return null;
    try {
      if (!mdOptions) {
        mdOptions = window.marked.getDefaults();
        mdOptions.gfm = true;
        mdOptions.breaks = true;  // a line break in a chat message is meant
      }
      // Lexer.lex() in two steps (as marked 18 does it), so that each run of
      // inline text can be capped.
      var lx = new Lexer(mdOptions);
      if (typeof lx.blockTokens !== "function" || !Array.isArray(lx.inlineQueue)) return null;
      lx.blockTokens(text.replace(/\r\n?/g, "\n"), lx.tokens);
      var queue = lx.inlineQueue;
      for (var k = 0; k < queue.length; k++) {
        lx.state.inRawBlock = false;
        if (queue[k].src.length <= MD_INLINE_MAX_CHARS) lx.inlineTokens(queue[k].src, queue[k].tokens);
        else queue[k].tokens.push({ type: "rawtext", text: queue[k].src });
      }
      lx.inlineQueue = [];
      return lx.tokens;
    } catch (e) {
      return null;  // (deep nesting overflows marked's stack): drawn raw
    }
  }

  function decodeEntities(s) {
    if (s.indexOf("&") === -1) return s;
    return s.replace(/&(#[xX][0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,8});/g, function (m, e) {
      if (e.charAt(0) === "#") {
        var n = e.charAt(1) === "x" || e.charAt(1) === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
        return n > 0 && n <= 0x10ffff && !(n >= 0xd800 && n <= 0xdfff) ? String.fromCodePoint(n) : "\ufffd";
      }
      return Object.prototype.hasOwnProperty.call(ENTITIES, e) ? ENTITIES[e] : m;
    });
  }

  // Only what starts exactly so is followed: javascript:, data:, file:, a
  // relative path (nothing to open beside a file), and any scheme hidden behind
  // spaces or control characters are not.
  function safeHref(href) {
    return typeof href === "string" && /^(https?:\/\/|mailto:)[^\s\u0000-\u001f\u007f]+$/i.test(href) ? href : null;
  }

  function mdLink(parent, t, image) {
    var href = safeHref(t.href);
    var e;
    if (href) {
      e = el("a", image ? "md-image" : "md-link");
      e.href = href;
      e.target = "_blank";
      e.rel = "noopener noreferrer";
      e.title = clip(typeof t.title === "string" && t.title ? t.title + " \u2014 " + href : href, TITLE_CHARS);
    } else {
      e = el("span", image ? "md-image" : "md-nolink");
      e.title = clip((image ? "image not shown: " : "link not followed: ") + str(t.href), TITLE_CHARS);
    }
    if (image) appendHighlighted(e, "[image: " + (str(t.text) || str(t.href)) + "]");
    else mdInline(e, Array.isArray(t.tokens) ? t.tokens : []);
    parent.appendChild(e);
  }

  function mdInline(parent, tokens) {
    tokens.forEach(function (t) {
      if (!isObject(t)) return;
      var e;
      switch (t.type) {
        case "text":
          if (Array.isArray(t.tokens)) mdInline(parent, t.tokens);
          else appendHighlighted(parent, decodeEntities(str(t.text)));
          return;
        case "escape": appendHighlighted(parent, str(t.text)); return;
        case "strong": case "em": case "del":
          e = el(t.type === "strong" ? "strong" : t.type === "em" ? "em" : "del");
          mdInline(e, Array.isArray(t.tokens) ? t.tokens : []);
          break;
        case "codespan": e = el("code"); appendHighlighted(e, str(t.text)); break;
        case "br": e = el("br"); break;
        case "link": mdLink(parent, t, false); return;
        case "image": mdLink(parent, t, true); return;
        case "checkbox": e = el("span", "md-check", t.checked ? "\u2611 " : "\u2610 "); break;
        case "html": e = el("span", "md-html"); appendHighlighted(e, str(t.text)); break;
        case "rawtext": e = el("span", "md-raw"); appendHighlighted(e, str(t.text)); break;
        default: appendHighlighted(parent, str(t.raw !== undefined ? t.raw : t.text)); return;
      }
      parent.appendChild(e);
    });
  }

  // Browsers stop laying out elements nested some hundreds deep (their text
  // disappears): quotes and lists deeper than this are drawn as their source.
  var MD_MAX_DEPTH = 12;

  function mdBlocks(parent, tokens, depth) {
    depth = depth || 0;
    tokens.forEach(function (t) {
      if (!isObject(t)) return;
      var e;
      if ((t.type === "blockquote" || t.type === "list") && depth >= MD_MAX_DEPTH) {
        e = el("div", "md-raw");
        appendHighlighted(e, str(t.raw).replace(/\n+$/, ""));
        parent.appendChild(e);
        return;
      }
      switch (t.type) {
        case "space": case "def": return;
        case "paragraph": e = el("p"); mdInline(e, Array.isArray(t.tokens) ? t.tokens : []); break;
        case "text":  // a tight list item's text
          if (Array.isArray(t.tokens)) mdInline(parent, t.tokens); else appendHighlighted(parent, decodeEntities(str(t.text)));
          return;
        case "heading":
          // One level down: the page's own title is the only h1.
          var depth = typeof t.depth === "number" && t.depth >= 1 && t.depth <= 6 ? t.depth : 6;
          e = el("h" + Math.min(6, depth + 1), "md-h" + depth);
          mdInline(e, Array.isArray(t.tokens) ? t.tokens : []);
          break;
        case "code":
          e = el("pre", "md-code");
          var code = el("code");
          var lang = /^[\w+#.-]{1,40}/.exec(str(t.lang).trim());
          if (lang) {
            code.className = "language-" + lang[0];
            e.appendChild(el("span", "md-lang", lang[0]));
          }
          appendHighlighted(code, str(t.text));
          e.appendChild(code);
          break;
        case "blockquote": e = el("blockquote"); mdBlocks(e, Array.isArray(t.tokens) ? t.tokens : [], depth + 1); break;
        case "list":
          e = el(t.ordered ? "ol" : "ul");
          if (t.ordered && typeof t.start === "number" && t.start !== 1) e.start = t.start;
          (Array.isArray(t.items) ? t.items : []).forEach(function (item) {
            var li = el("li", isObject(item) && item.task ? "task" : null);
            if (isObject(item)) mdBlocks(li, Array.isArray(item.tokens) ? item.tokens : [], depth + 1);
            e.appendChild(li);
          });
          break;
        case "table":
          e = el("div", "md-table");
          var table = el("table");
          var row = function (cells, tag) {
            var tr = el("tr");
            (Array.isArray(cells) ? cells : []).forEach(function (c) {
              var cell = el(tag, isObject(c) && /^(left|right|center)$/.test(str(c.align)) ? "align-" + c.align : null);
              if (isObject(c)) mdInline(cell, Array.isArray(c.tokens) ? c.tokens : []);
              tr.appendChild(cell);
            });
            return tr;
          };
          var thead = el("thead");
          thead.appendChild(row(t.header, "th"));
          table.appendChild(thead);
          var tbody = el("tbody");
          (Array.isArray(t.rows) ? t.rows : []).forEach(function (r) { tbody.appendChild(row(r, "td")); });
          table.appendChild(tbody);
          e.appendChild(table);
          break;
        case "hr": e = el("hr"); break;
        case "html": e = el("div", "md-html"); appendHighlighted(e, str(t.text).replace(/\n+$/, "")); break;
        case "checkbox": e = el("span", "md-check", t.checked ? "\u2611 " : "\u2610 "); break;
        default:
          if (Array.isArray(t.tokens)) { e = el("div"); mdBlocks(e, t.tokens, depth + 1); }
          else { e = el("p"); appendHighlighted(e, str(t.raw !== undefined ? t.raw : t.text)); }
      }
      parent.appendChild(e);
    });
  }

  // Raw or rendered: one switch for the page, and one per message that
  // overrides it, both kept while the page is open.
  var rawAll = false;
  var rawOf = new Map();   // message index -> true (raw) / false (rendered)
  var mdPainters = [];     // {i, paint} of the Markdown blocks currently in the DOM
  function isRaw(i) { return i !== null && rawOf.has(i) ? rawOf.get(i) : rawAll; }

  // Draws *text* into *body*: as Markdown when *md* says so and it parses,
  // else as the text it is.
  function drawText(body, text, asMd) {
    body.textContent = "";
    var tokens = asMd ? mdTokens(text) : null;
    if (tokens) {
      body.classList.add("md");
      mdBlocks(body, tokens);
    } else {
      body.classList.remove("md");
      appendHighlighted(body, text);
    }
  }

  function ellipsis(body) {
    var dots = el("span", "ellipsis", " \u2026");
    var last = body.lastElementChild;
    if (body.classList.contains("md") && last && last.tagName === "P") last.appendChild(dots); else body.appendChild(dots);
  }

  // *md*: {i: message index (null outside the list)} for text that may be
  // Markdown, else null.
  function textBlock(text, cls, md) {
    var wrap = el("div", "text" + (cls ? " " + cls : ""));
    var body = el("div", "text-body");
    wrap.appendChild(body);
    if (md && text.length > MD_MAX_CHARS) md = null;
    var cut = previewCut(text);
    var paintMd = null;
    if (cut >= text.length) {
      paintMd = function () { drawText(body, text, !!md && !isRaw(md.i)); };
      paintMd();
      if (md) mdPainters.push({ i: md.i, paint: paintMd });
      return wrap;
    }
    wrap.classList.add("long");
    var btn = el("button", "more-btn");
    btn.type = "button";
    var hidden = text.length - cut;
    var hiddenLines = countLines(text, cut) - 1;
    var expanded = state.expandAll === true || matches(text.slice(Math.max(0, cut - state.query.length)));
    var all = false;  // past EXPANDED_CHARS, drawn only on request
    var allBtn = null;
    function paint() {
      var asMd = !!md && !isRaw(md.i);
      if (allBtn) { allBtn.remove(); allBtn = null; }
      if (expanded) {
        if (all || text.length <= EXPANDED_CHARS) {
          drawText(body, text, asMd);
        } else {
          drawText(body, text.slice(0, EXPANDED_CHARS), false);
          ellipsis(body);
          allBtn = el("button", "more-btn show-all", "Show all \u00b7 " + plural(text.length - EXPANDED_CHARS, "more char"));
          allBtn.type = "button";
          allBtn.addEventListener("click", function () { all = true; paint(); });
          wrap.insertBefore(allBtn, btn);
        }
        btn.textContent = "Show less";
      } else {
        drawText(body, text.slice(0, cut), asMd);
        ellipsis(body);
        btn.textContent = "Show more \u00b7 " + (hiddenLines > 0 ? plural(hiddenLines, "more line") + ", " : "") + plural(hidden, "char");
      }
      btn.setAttribute("aria-expanded", expanded ? "true" : "false");
    }
    btn.addEventListener("click", function () { expanded = !expanded; paint(); });
    expanders.push(function (v) { if (expanded !== v) { expanded = v; paint(); } });
    if (md) mdPainters.push({ i: md.i, paint: paint });
    wrap.appendChild(btn);
    paint();
    return wrap;
  }

  // ---- message rendering --------------------------------------------------

  function lineLink(i) {
    var n = lineOf(i);
    var a = el("a", "line", "L" + n);
    a.href = "#L" + n;
    a.title = "Line " + n + " of the trace file";
    return a;
  }

  function prevTs(i) {
    for (var k = i - 1; k >= 0 && k >= i - 50; k--) {
      var t = tsOf(messages[k]);
      if (t !== null) return t;
    }
    return null;
  }

  // Whether Markdown could draw *text* other than as it is: plain prose ("fix
  // the bug") gets no switch. A cheap over-approximation, not a parse.
  var MD_SYNTAX = /[*_`#>|~\[\]<&\\]|^ {0,3}([-+]|\d{1,9}[.)])\s|^ {4}|https?:\/\/|www\.|mailto:|^ {0,3}=+\s*$/m;
  function looksMarked(text) { return text !== "" && text.length <= MD_MAX_CHARS && MD_SYNTAX.test(text); }

  // The per-message switch between the Markdown and the raw text.
  function rawButton(i) {
    var b = el("button", "raw-btn");
    b.type = "button";
    b.setAttribute("data-msg", String(i));
    labelRaw(b, i);
    b.addEventListener("click", function () {
      rawOf.set(i, !isRaw(i));
      labelRaw(b, i);
      mdPainters.forEach(function (p) { if (p.i === i) p.paint(); });
    });
    return b;
  }
  function labelRaw(b, i) {
    var raw = isRaw(i);
    b.textContent = raw ? "Raw" : "Markdown";
    b.title = raw ? "Shown as raw text: click to render the Markdown" : "Rendered as Markdown: click to show the raw text";
    b.setAttribute("aria-pressed", raw ? "true" : "false");
  }

  function renderHead(m, i, role, extra, tail) {
    var head = el("div", "head");
    head.appendChild(el("span", "role", ROLES[role] || (role ? role : "no role")));
    if (typeof m.model === "string" && m.model) {
      var mo = inline("span", "model", m.model);
      mo.title = "model: " + clip(m.model, TITLE_CHARS);
      head.appendChild(mo);
    }
    if (isObject(m.usage)) head.appendChild(usageChip(m.usage));
    if (extra) extra.forEach(function (x) { head.appendChild(x); });
    head.appendChild(el("span", "spacer"));
    var ts = tsOf(m);
    if (ts !== null) {
      var p = prevTs(i);
      if (p !== null) {
        var gap = ts - p;
        var d = el("span", "delta", (gap < 0 ? "\u2212" : "+") + fmtDuration(Math.abs(gap)));
        d.title = "time since the previous message";
        head.appendChild(d);
      }
      head.appendChild(timeEl(ts, false));
    }
    if (tail) head.appendChild(tail);
    head.appendChild(lineLink(i));
    return head;
  }

  function renderResult(j, call) {
    var m = messages[j] || {};
    var content = str(m.content);
    var err = isError(content);
    var box = el("div", "result" + (err ? " error" : ""));
    box.id = "L" + lineOf(j);
    var head = el("div", "result-head");
    head.appendChild(el("span", "kind", "Result"));
    if (err) head.appendChild(el("span", "badge error", "error"));
    var ts = tsOf(m), owner = tsOf(messages[call.owner]);
    head.appendChild(el("span", "spacer"));
    if (ts !== null && owner !== null) {
      var d = el("span", "delta", "took " + fmtDuration(ts - owner));
      d.title = "time from the tool call to this result";
      head.appendChild(d);
    }
    if (ts !== null) head.appendChild(timeEl(ts, false));
    head.appendChild(lineLink(j));
    box.appendChild(head);
    if (content === "") box.appendChild(el("div", "empty", "empty result"));
    else box.appendChild(textBlock(content, "mono"));
    return box;
  }

  function renderCall(c) {
    var box = el("div", "call");
    var head = el("div", "call-head");
    head.appendChild(el("span", "icon", "\u0192"));
    head.appendChild(inline("span", "fn", callName(c) || "(unnamed tool)"));
    if (c.tc.id !== undefined) head.appendChild(inline("span", "callid", str(c.tc.id)));
    box.appendChild(head);
    var pa = prettyArgs(callArgs(c));
    var args = el("div", "args");
    var label = el("div", "label", "Arguments");
    if (!pa.ok) {
      label.appendChild(document.createTextNode(" "));
      label.appendChild(el("span", "badge warn", "not valid JSON"));
    }
    args.appendChild(label);
    if (pa.text === "") args.appendChild(el("div", "empty", "no arguments"));
    else args.appendChild(textBlock(pa.text, "mono"));
    box.appendChild(args);
    if (c.results.length === 0) {
      box.appendChild(el("div", "pending", "No result recorded for this call."));
    } else {
      c.results.forEach(function (j) { box.appendChild(renderResult(j, c)); });
    }
    subAgentLinks(c, box);
    return box;
  }

  function renderItem(it) {
    var m = isObject(messages[it.i]) ? messages[it.i] : {};
    var role = roleOf(m);
    var art = el("article", "msg role-" + roleClass(role) + (it.error ? " has-error" : ""));
    art.id = "L" + lineOf(it.i);
    var extra = [];
    if (it.orphan) {
      var b = el("span", "badge warn", "no matching call");
      b.title = "toolCallId " + clip(str(m.toolCallId), TITLE_CHARS) + " does not answer an earlier tool call";
      extra.push(b);
      if (m.toolCallId !== undefined) extra.push(inline("span", "callid", str(m.toolCallId)));
      if (isError(str(m.content))) extra.push(el("span", "badge error", "error"));
    }
    var mdText = (!it.orphan && MD_ROLES[role] && looksMarked(str(m.content))) || looksMarked(str(m.reasoningContent));
    art.appendChild(renderHead(m, it.i, role, extra, mdText ? rawButton(it.i) : null));
    var reasoning = str(m.reasoningContent);
    if (reasoning !== "") {
      var det = el("details", "thinking");
      var sum = el("summary", null, "Thinking \u00b7 " + plural(reasoning.length, "char"));
      det.appendChild(sum);
      var filled = false;
      // The reasoning text is built when first opened, which keeps long traces light.
      var fill = function () {
        if (filled) return;
        filled = true;
        det.appendChild(textBlock(reasoning, "", { i: it.i }));
      };
      det.addEventListener("toggle", function () { if (det.open) fill(); });
      if (state.expandAll === true || matches(reasoning)) { fill(); det.open = true; }
      art.appendChild(det);
    }
    var content = str(m.content);
    if (content !== "") art.appendChild(textBlock(content, it.orphan ? "mono" : "", !it.orphan && MD_ROLES[role] ? { i: it.i } : null));
    else if (!it.calls.length && reasoning === "") art.appendChild(el("div", "empty", "empty message"));
    it.calls.forEach(function (c) { art.appendChild(renderCall(c)); });
    var alt = branchesAt.get(itemOfMessage[it.i]);
    if (alt) alt.forEach(function (b) { art.appendChild(renderBranch(b)); });
    return art;
  }

  // ---- lazy list -------------------------------------------------------------
  // The list shows the window view[lo, hi) of the current filter. Scrolling down
  // extends hi; a deep link starts the window at its target, and "Show earlier"
  // extends lo. Only what is in the window is ever built.

  var lo = 0, hi = 0;
  var earlierBar = document.getElementById("earlier");
  var anchoring = !!(window.CSS && CSS.supports && CSS.supports("overflow-anchor", "auto"));

  function renderMore(n) {
    var end = Math.min(view.length, hi + n);
    if (end <= hi) return;
    var frag = document.createDocumentFragment();
    for (; hi < end; hi++) frag.appendChild(renderItem(view[hi]));
    list.appendChild(frag);
    updateStatus();
  }

  function renderEarlier(n) {
    var start = Math.max(0, lo - n);
    if (start >= lo) return;
    var anchor = list.firstElementChild;
    var before = anchor ? anchor.getBoundingClientRect().top : 0;
    var frag = document.createDocumentFragment();
    for (var k = start; k < lo; k++) frag.appendChild(renderItem(view[k]));
    lo = start;
    list.insertBefore(frag, list.firstChild);
    updateStatus();
    // Browsers with scroll anchoring keep the reading position themselves.
    if (anchor && !anchoring) window.scrollBy(0, anchor.getBoundingClientRect().top - before);
  }

  function button(text, onClick) {
    var b = el("button", null, text);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  }

  function updateStatus() {
    var parts = [];
    var filtered = state.query || state.errorsOnly;
    if (filtered) {
      parts.push(plural(view.length, "match", "matches") + " of " + plural(items.length, "entry", "entries"));
    } else {
      // The header counts messages; the list counts entries (a message with the
      // results of its tool calls): say both, so the two numbers agree.
      parts.push(plural(messages.length, "message") + " in " + plural(items.length, "entry", "entries"));
    }
    if (lo > 0 || hi < view.length) {
      parts.push("showing entries " + nf.format(view.length ? lo + 1 : 0) + "–" + nf.format(hi) + (filtered ? " of " + nf.format(view.length) : ""));
    }
    statusEl.textContent = parts.join(" · ");
    statusEl.title = "An entry is one message with the results of its tool calls beside it";
    earlierBar.textContent = "";
    if (lo > 0) {
      earlierBar.appendChild(button("Show " + nf.format(Math.min(lo, CHUNK_ITEMS)) + " earlier", function () { renderEarlier(CHUNK_ITEMS); }));
      earlierBar.appendChild(button("Back to the start", function () { showFrom(0); window.scrollTo(0, 0); }));
    }
    moreBar.textContent = "";
    if (hi < view.length) {
      var rest = view.length - hi;
      moreBar.appendChild(el("span", null, nf.format(rest) + " more below"));
      moreBar.appendChild(button("Show all", function () { renderMore(rest); }));
      moreBar.appendChild(button("Jump to the end", function () {
        showFrom(Math.max(0, view.length - FIRST_ITEMS));
        moreBar.scrollIntoView({ block: "end" });
      }));
    } else if (view.length === 0) {
      moreBar.appendChild(el("div", "none", messages.length ? "No messages match." : "This trace has no messages yet."));
    }
  }

  var observer = null;
  function recheck() {
    // Observing again re-checks at once, so a tall screen keeps filling.
    if (observer) { observer.unobserve(moreBar); observer.observe(moreBar); }
  }
  if ("IntersectionObserver" in window) {
    observer = new IntersectionObserver(function (entries) {
      for (var k = 0; k < entries.length; k++) {
        if (entries[k].isIntersecting && hi < view.length) {
          renderMore(CHUNK_ITEMS);
          recheck();
          return;
        }
      }
    }, { rootMargin: "1500px 0px" });
    observer.observe(moreBar);
  } else {
    window.addEventListener("scroll", function () {
      if (hi < view.length && moreBar.getBoundingClientRect().top < window.innerHeight + 1500) renderMore(CHUNK_ITEMS);
    }, { passive: true });
  }

  function showFrom(pos) {
    expanders = [];
    mdPainters = [];
    list.textContent = "";
    lo = hi = Math.max(0, Math.min(pos, view.length));
    renderMore(FIRST_ITEMS);
    updateStatus();
    recheck();
  }

  function rebuild() {
    if (!state.query && !state.errorsOnly) {
      view = items;
    } else {
      view = items.filter(function (it) {
        if (state.errorsOnly && !it.error) return false;
        return !state.query || haystack(it).indexOf(state.query) !== -1;
      });
    }
    showFrom(0);
    // The filter the list currently shows (search is debounced, so it can lag the input).
    list.setAttribute("data-query", state.query);
  }

  // ---- token usage and sub-agent links ---------------------------------------
  // usage: {input, output, cacheRead, cacheWrite, totalTokens, reasoning?, cost?}
  // on assistant messages (an STS extension, Pi's shape). links: set by
  // `ststrace view DIR`, {parent: ref, children: [ref]}, ref = {id, name?, href,
  // parentToolCallId?}, hrefs relative to this page.

  var links = isObject(data.links) ? data.links : {};
  var USAGE_PARTS = [["input", "input"], ["output", "output"], ["cacheRead", "cache read"], ["cacheWrite", "cache write"], ["reasoning", "reasoning"]];

  function num(v) { return typeof v === "number" && isFinite(v) ? v : 0; }
  function fmtCost(v) { return "$" + (v >= 0.01 ? v.toFixed(4) : v.toPrecision(3)); }
  function usageTotal(u) {
    return typeof u.totalTokens === "number" ? u.totalTokens : num(u.input) + num(u.output) + num(u.cacheRead) + num(u.cacheWrite);
  }
  function usageTitle(u) {
    var parts = [];
    USAGE_PARTS.forEach(function (p) { if (typeof u[p[0]] === "number") parts.push(nf.format(u[p[0]]) + " " + p[1]); });
    if (isObject(u.cost) && typeof u.cost.total === "number") parts.push(fmtCost(u.cost.total));
    return parts.join(", ");
  }
  function usageChip(u) {
    var text = nf.format(usageTotal(u)) + " tok";
    if (isObject(u.cost) && typeof u.cost.total === "number") text += " \u00b7 " + fmtCost(u.cost.total);
    var chip = el("span", "usage", text);
    chip.title = "tokens: " + usageTitle(u);
    return chip;
  }
  function usageStats(stat) {
    var tot = {}, cost = null, any = false;
    messages.forEach(function (m) {
      if (!isObject(m) || !isObject(m.usage)) return;
      any = true;
      USAGE_PARTS.concat([["totalTokens"]]).forEach(function (p) { tot[p[0]] = (tot[p[0]] || 0) + num(m.usage[p[0]]); });
      if (isObject(m.usage.cost) && typeof m.usage.cost.total === "number") cost = (cost || 0) + m.usage.cost.total;
    });
    if (!any) return;
    stat("Tokens", nf.format(tot.totalTokens)).title = usageTitle(tot);
    if (cost !== null) stat("Cost", fmtCost(cost)).title = "from the prices given to the recording session";
  }
  function sessionLink(ref) {
    var a = el("a", "session-link", isObject(ref) && typeof ref.name === "string" && ref.name ? ref.name : str(ref.id));
    if (isObject(ref) && typeof ref.href === "string") a.href = ref.href;
    a.title = "session " + str(ref.id);
    return a;
  }
  function childrenOf(callId) {
    var kids = Array.isArray(links.children) ? links.children : [];
    return kids.filter(function (k) { return isObject(k) && (callId === undefined || k.parentToolCallId === callId); });
  }
  function sessionLinkRows(row) {
    if (isObject(links.parent)) row("parent session", sessionLink(links.parent));
    var kids = childrenOf(undefined);
    if (!kids.length) return;
    var span = el("span", "session-links");
    kids.forEach(function (k) { span.appendChild(sessionLink(k)); });
    row(kids.length === 1 ? "sub-agent" : "sub-agents (" + nf.format(kids.length) + ")", span);
  }
  function subAgentLinks(c, box) {
    if (typeof c.tc.id !== "string") return;
    var kids = childrenOf(c.tc.id);
    if (!kids.length) return;
    var div = el("div", "subagents");
    div.appendChild(el("span", "kind", kids.length === 1 ? "Sub-agent" : "Sub-agents"));
    kids.forEach(function (k) { div.appendChild(sessionLink(k)); });
    box.appendChild(div);
  }

  // ---- header -------------------------------------------------------------

  // A header field that holds a time as a number (a converter's "timestamp",
  // a "created_at"): milliseconds since the epoch as in STS messages, or
  // seconds when the value is too small to be milliseconds of this century.
  function epochMs(key, v) {
    if (typeof v !== "number" || !isFinite(v) || v <= 0) return null;
    if (!/(^|_)(timestamp|time|ts|date|created|updated|started|ended)(_at|_ms)?$/i.test(key) && !/[a-z](At|Time|Timestamp|Date|Ms)$/.test(key)) return null;
    if (v >= 946684800000 && v < 4102444800000) return v;      // 2000..2100 in ms
    if (v >= 946684800 && v < 4102444800) return v * 1000;     // 2000..2100 in s
    return null;
  }

  function renderSession() {
    var box = document.getElementById("session");
    var eyebrow = el("div", "eyebrow");
    eyebrow.appendChild(el("span", "brand", "Session trace"));
    if (header.harness !== undefined) {
      var hv = inline("span", "chip harness", str(header.harness));
      hv.title = "harness";
      eyebrow.appendChild(hv);
    }
    if (typeof source.file === "string") {
      var f = inline("span", "chip", source.file);
      f.title = "trace file";
      eyebrow.appendChild(f);
    }
    if (typeof source.note === "string") {
      // Where the page came from, beside the file name: not a row of the
      // header's own fields, where it could meet a field of the same name.
      var note = inline("span", "chip note", source.note);
      note.title = "how this page was made";
      eyebrow.appendChild(note);
    }
    box.appendChild(eyebrow);
    var name = header.name;
    var title = name !== undefined && str(name) !== "" ? str(name) : null;
    var h1 = inline("h1", title ? null : "untitled", title || "Untitled session");
    box.appendChild(h1);
    document.title = clip(title || str(header.id) || "Session", INLINE_CHARS) + " \u00b7 ststrace";

    var stats = el("div", "stats");
    function stat(k, v, cls, small) {
      var s = el("div", "stat" + (cls ? " " + cls : ""));
      s.appendChild(el("div", "k", k));
      s.appendChild(el("div", "v" + (small ? " small" : ""), v));
      stats.appendChild(s);
      return s;
    }
    var roleParts = [];
    ["user", "assistant", "system", "tool"].forEach(function (r) { if (counts[r]) roleParts.push(nf.format(counts[r]) + " " + r); });
    if (counts.other) roleParts.push(nf.format(counts.other) + " other");
    stat("Messages", nf.format(messages.length)).title = roleParts.join(", ");
    stat("Tool calls", nf.format(toolCalls)).title = nf.format(toolResults) + " results, " + nf.format(unanswered) + " without result";
    stat("Errors", nf.format(errors), errors ? "bad" : null).title = "tool results starting with \u201cError:\u201d";
    if (firstTs !== null && lastTs !== null) stat("Duration", fmtDuration(lastTs - firstTs));
    if (models.size) {
      var names = Array.from(models.keys()).map(function (n) { return clip(n, INLINE_CHARS); });
      var shown = names.slice(0, 12).join(", ") + (names.length > 12 ? ", \u2026 " + nf.format(names.length - 12) + " more" : "");
      stat(models.size === 1 ? "Model" : "Models", shown, null, true);
    }
    usageStats(stat);
    // The session's outcome (Session.outcome / ststrace outcome): reward and success up top.
    var outcome = isObject(data.outcome) ? data.outcome : null;
    if (outcome && typeof outcome.reward === "number") stat("Reward", String(outcome.reward)).title = "outcome reward";
    if (outcome && typeof outcome.success === "boolean") {
      stat("Outcome", outcome.success ? "success" : "failure", outcome.success ? null : "bad").title = "outcome success";
    }
    box.appendChild(stats);

    var dl = el("dl", "meta");
    function row(k, v, mono) {
      dl.appendChild(inline("dt", null, k));
      var dd = el("dd", mono ? "mono" : null);
      if (typeof v === "string") dd.appendChild(inline("span", null, v)); else dd.appendChild(v);
      dl.appendChild(dd);
    }
    if (header.id !== undefined) row("id", str(header.id), true);
    if (header.harness !== undefined) row("harness", str(header.harness), true);
    if (firstTs !== null) {
      var started = el("span");
      started.appendChild(timeEl(firstTs, true));
      row("started", started);
    }
    if (roleParts.length) row("roles", roleParts.join(" \u00b7 "));
    if (unanswered) {
      var u = el("span", "chip warn", plural(unanswered, "call") + " without result");
      row("unanswered", u);
    }
    if (orphans) row("unpaired results", el("span", "chip warn", plural(orphans, "tool result") + " without an earlier call"));
    Object.keys(header).forEach(function (k) {
      if (k === "type" || k === "harness" || k === "id" || k === "name") return;
      var v = header[k];
      if (typeof v === "string") { row(k, v); return; }
      var when = epochMs(k, v);
      if (when !== null) {
        var t = el("span");
        t.appendChild(timeEl(when, true));
        t.title = String(v) + " (" + t.firstChild.title + ")";
        row(k, t);
        return;
      }
      var compact = str(v);
      row(k, textBlock(compact.length <= 80 ? compact : JSON.stringify(v, null, 2), "mono"));
    });
    if (outcome) {
      ["rewards", "labels"].forEach(function (k) {
        if (!isObject(outcome[k])) return;
        Object.keys(outcome[k]).forEach(function (name) { row(k === "rewards" ? "reward " + name : "label " + name, str(outcome[k][name])); });
      });
    }
    if (typeof source.bytes === "number") row("size", fmtBytes(source.bytes));
    sessionLinkRows(row);
    box.appendChild(dl);

    var foot = document.getElementById("foot");
    var text = "Rendered by ststrace" + (typeof source.version === "string" ? " " + source.version : "");
    if (typeof source.generated === "string") text += " on " + source.generated;
    foot.textContent = text + " \u00b7 this page works offline and loads nothing from the network";
  }

  // ---- controls -----------------------------------------------------------

  var search = document.getElementById("search");
  var timer = null;
  search.addEventListener("input", function () {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(function () {
      timer = null;
      var q = search.value.trim();
      state.query = q.toLowerCase();
      state.re = q ? new RegExp(escapeRegExp(q), "giu") : null;
      rebuild();
    }, 120);
  });
  document.getElementById("errors-only").addEventListener("change", function (e) {
    state.errorsOnly = e.target.checked;
    rebuild();
  });
  document.getElementById("raw-text").addEventListener("change", function (e) {
    rawAll = e.target.checked;
    rawOf.clear();
    mdPainters.forEach(function (p) { p.paint(); });
    var btns = list.querySelectorAll("button.raw-btn");
    for (var k = 0; k < btns.length; k++) labelRaw(btns[k], parseInt(btns[k].getAttribute("data-msg"), 10));
  });
  function setAll(open) {
    state.expandAll = open;
    expanders.forEach(function (f) { f(open); });
    var dets = list.querySelectorAll("details.thinking");
    for (var k = 0; k < dets.length; k++) dets[k].open = open;
  }
  document.getElementById("expand-all").addEventListener("click", function () { setAll(true); });
  document.getElementById("collapse-all").addEventListener("click", function () { setAll(false); });
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== search && !e.ctrlKey && !e.metaKey && !e.altKey) {
      e.preventDefault();
      search.focus();
      search.select();
    } else if (e.key === "Escape" && document.activeElement === search && search.value) {
      search.value = "";
      search.dispatchEvent(new Event("input"));
    }
  });

  // A link such as page.html#L120 shows the list from (just before) that line.
  function goToHash() {
    var mt = /^#L(\d+)$/.exec(location.hash);
    if (!mt) return;
    var i = indexOfLine(parseInt(mt[1], 10));
    if (!(i >= 0 && i < messages.length)) return;
    var target = itemOfMessage[i];
    var pos = view.indexOf(items[target]);
    if (pos === -1) {
      search.value = "";
      state.query = "";
      state.re = null;
      state.errorsOnly = false;
      document.getElementById("errors-only").checked = false;
      rebuild();
      pos = target;
    }
    if (pos < lo || pos >= hi) showFrom(Math.max(0, pos - 2));
    var node = document.getElementById("L" + lineOf(i));
    if (node) {
      var prev = list.querySelectorAll(".target");
      for (var k = 0; k < prev.length; k++) prev[k].classList.remove("target");
      node.classList.add("target");
      node.scrollIntoView({ block: "start" });
    }
  }
  window.addEventListener("hashchange", goToHash);

  renderSession();
  rebuild();
  goToHash();
  document.documentElement.setAttribute("data-ready", "1");
  // Lets anyone (and our browser tests) measure the time to the first screen.
  if (window.performance && performance.mark) performance.mark("ststrace-ready");
})();
