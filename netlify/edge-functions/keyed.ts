// A request that carries a key goes to the sidecar, whatever its path, so that a granted key
// sees its restricted records (the CDN holds public files only); any other request is
// served from the CDN as site_out/_redirects maps it, but for an anonymous read of one
// record, /api/{collection}/{id}: it is rewritten here to the record's file, which sits in
// a shard folder named by the first byte of the SHA-256 of its id (exporter/contract/
// layout.py), since no redirect placeholder can name part of a path segment. This keeps
// every folder of site_out/ under Netlify's 54,000 files.
//
// It runs on every path: a key sent to any of the node's open paths (pages, downloads, the
// sitemap) must be checked as the sidecar checks it (a bad key is 401 there too; a key
// limited to some collections gets 403 for another's download), and only the sidecar can.
// The trade-off: every request costs an Edge Function invocation (an anonymous one runs no
// more than the header check below, then the CDN's file), and every keyed read of an open
// path a trip to the sidecar. tests/test_netlify.py checks that the paths below cover every
// path of the endpoint table.
//
// Set FEDNODE_SIDECAR_URL (the manifest's node.sidecar_url) in the site's environment.

type Next = () => Promise<Response>;

export function keyed(request: Request): boolean {
  return request.headers.has("authorization") || request.headers.has("x-api-key");
}

const RECORD = /^\/api\/([a-z]+)\/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

// The file that answers an anonymous read of one record, or undefined for other paths.
export async function recordFile(url: URL): Promise<URL | undefined> {
  const found = RECORD.exec(url.pathname);
  if (!found) {
    return undefined;
  }
  const [, collection, id] = found;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(id));
  const shard = new Uint8Array(digest)[0].toString(16).padStart(2, "0");
  return new URL(`/api/${collection}/${shard}/${id}.json`, url);
}

// `sidecar`: its address, undefined where FEDNODE_SIDECAR_URL is not set (then the public
// site is still served; a keyed request gets the node's JSON error saying what is missing).
export async function forward(
  request: Request, sidecar: string | undefined, next: Next,
): Promise<Response | URL> {
  if (!keyed(request)) {
    const file = request.method === "GET" || request.method === "HEAD"
      ? await recordFile(new URL(request.url))
      : undefined;
    return file ?? next();  // a URL: Netlify serves that same-site file, with a 200
  }
  if (!sidecar) {
    return Response.json({
      error: {
        code: "unavailable",
        message: "this site does not know where the node's sidecar answers keyed requests: " +
          "its operator sets FEDNODE_SIDECAR_URL (the manifest's node.sidecar_url)",
      },
    }, { status: 503 });
  }
  const url = new URL(request.url);
  // the sidecar's own path, if it has one, goes before the request's (as _redirects does)
  const target = new URL(sidecar.replace(/\/+$/, "") + url.pathname + url.search);
  const headers = new Headers(request.headers);
  headers.delete("host");
  const body = request.method === "GET" || request.method === "HEAD"
    ? undefined
    : await request.arrayBuffer();
  return await fetch(target, { method: request.method, headers, body, redirect: "manual" });
}

function sidecarUrl(): string | undefined {
  // deno-lint-ignore no-explicit-any
  const netlify = (globalThis as any).Netlify;
  return netlify?.env?.get("FEDNODE_SIDECAR_URL") ?? Deno.env.get("FEDNODE_SIDECAR_URL") ??
    undefined;
}

export default (request: Request, context: { next: Next }): Promise<Response | URL> =>
  forward(request, sidecarUrl(), () => context.next());

export const config = { path: "/*" };
