// DOM helpers. Tenant text only ever becomes a text node or an attribute value: nothing
// here parses HTML, so a name like <img src=x onerror=...> is shown, never run.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(node, props) {
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.setAttribute("class", value);
    else if (key === "on") {
      for (const [event, handler] of Object.entries(value)) node.addEventListener(event, handler);
    } else if (key === "style" || key.startsWith("on")) {
      throw new Error(`refusing to set ${key}: styles live in style.css, handlers use "on"`);
    } else if (key === "value" || key === "checked" || key === "disabled") node[key] = value;
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  return node;
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An HTML element: el("button", {type: "button", on: {click}}, "Pause"). */
export function el(tag, props, ...children) {
  return append(apply(document.createElement(tag), props), children);
}

/** Add props and children to an existing element. */
export function fill(node, props, ...children) {
  return append(apply(node, props), children);
}

/** An SVG element, same calling convention as el(). */
export function svg(tag, props, ...children) {
  return append(apply(document.createElementNS(SVG_NS, tag), props), children);
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

/** A short-lived id for label/aria wiring. */
let counter = 0;
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** Focus a view's heading after navigation, so keyboard and screen-reader users land there. */
export function focusHeading(root) {
  const heading = root.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: true });
  }
}

export function statusBadge(status) {
  return el("span", { class: `badge s-${status}`, text: status });
}
