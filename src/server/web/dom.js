// A small helper to build elements: el('li', { class: 'message' }, [child, 'text']).
// Text children become text nodes (never parsed as HTML); attributes are set with
// setAttribute, and `on_*` keys add event listeners.
export function el(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on_')) node.addEventListener(key.slice(3), value);
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of [].concat(children)) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === 'string' ? document.createTextNode(child) : child);
  }
  return node;
}
