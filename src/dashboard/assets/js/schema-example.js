// An example value for a JSON Schema: what the event viewer shows next to an
// event type's schema. Deterministic, so the same schema always gives the
// same example, and valid against the schema for the keywords our schemas
// use ($ref into $defs, const, enum, oneOf/anyOf, type, properties,
// required, items, minimum, format, pattern).

const FORMATS = {
  uuid: (n) => `0193a1b2-c3d4-7e5f-8a6b-${String(n).padStart(12, '0')}`,
  'date-time': () => '2026-01-15T09:30:00.000Z',
  date: () => '2026-01-15',
  email: () => 'ada@example.com',
  uri: () => 'https://example.com/hooks/rolecall',
};

/** Strings chosen by property name when the schema names no format. */
const BY_NAME = {
  email: 'ada@example.com',
  url: 'https://example.com/hooks/rolecall',
  source: 'https://github.com/acme/robot',
  repository: 'acme/robot',
};

/** An example instance of `schema`, resolving `$ref`s against `root`. */
export function exampleOf(schema, root = schema) {
  let counter = 0;
  const nextId = () => { counter += 1; return counter; };

  function resolve(node) {
    let current = node;
    for (let depth = 0; current && typeof current.$ref === 'string' && depth < 32; depth += 1) {
      const path = current.$ref.replace(/^#\//, '').split('/').map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
      current = path.reduce((at, key) => (at ? at[key] : undefined), root);
    }
    return current || {};
  }

  function string(node, name) {
    if (node.format && FORMATS[node.format]) return FORMATS[node.format](nextId());
    const candidate = BY_NAME[name] || (name ? `example ${name.replace(/_/g, ' ')}` : 'example');
    if (node.pattern) {
      try {
        if (!new RegExp(node.pattern, 'u').test(candidate)) return 'example';
      } catch (_) {
        return candidate;
      }
    }
    return candidate;
  }

  function walk(raw, name, depth) {
    const node = resolve(raw);
    if (depth > 24) return null;
    if ('const' in node) return node.const;
    if (Array.isArray(node.enum) && node.enum.length) return node.enum[0];
    const choices = node.oneOf || node.anyOf;
    if (Array.isArray(choices) && choices.length) {
      const informative = choices.find((c) => resolve(c).type !== 'null') || choices[0];
      return walk(informative, name, depth + 1);
    }
    const types = Array.isArray(node.type) ? node.type : [node.type];
    const type = types.find((t) => t && t !== 'null') || types[0];
    switch (type) {
      case 'object': {
        const properties = node.properties || {};
        const order = [...(node.required || []), ...Object.keys(properties)];
        const value = {};
        for (const key of order) {
          if (key in value || !(key in properties)) continue;
          value[key] = walk(properties[key], key, depth + 1);
        }
        return value;
      }
      case 'array':
        return node.items ? [walk(node.items, name, depth + 1)] : [];
      case 'integer':
      case 'number':
        return typeof node.minimum === 'number' ? Math.max(node.minimum, 1) : 1;
      case 'boolean':
        return true;
      case 'null':
        return null;
      case 'string':
        return string(node, name);
      default:
        return properties(node) ? walk({ ...node, type: 'object' }, name, depth + 1) : null;
    }
  }

  const properties = (node) => node && typeof node.properties === 'object';

  return walk(schema, null, 0);
}
