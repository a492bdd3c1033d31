// A request that carries a key goes to the sidecar, whatever its path, so that a granted key
// sees its restricted records (the CDN holds public files only); any other request is
// served from the CDN as netlify.toml maps it.
//
// The trade-off: every keyed read of an open path costs an Edge Function invocation and a
// trip to the sidecar. Anonymous reads never run more than the header check below.
//
// Set FEDNODE_SIDECAR_URL (the manifest's node.sidecar_url) in the site's environment.

type Next = () => Promise<Response>;

export function keyed(request: Request): boolean {
  return request.headers.has("authorization") || request.headers.has("x-api-key");
}

export async function forward(request: Request, sidecar: string, next: Next): Promise<Response> {
  if (!keyed(request)) {
    return next();
  }
  const url = new URL(request.url);
  const target = new URL(url.pathname + url.search, sidecar);
  const headers = new Headers(request.headers);
  headers.delete("host");
  const body = request.method === "GET" || request.method === "HEAD"
    ? undefined
    : await request.arrayBuffer();
  return await fetch(target, { method: request.method, headers, body, redirect: "manual" });
}

function sidecarUrl(): string {
  // deno-lint-ignore no-explicit-any
  const netlify = (globalThis as any).Netlify;
  const url = netlify?.env?.get("FEDNODE_SIDECAR_URL") ?? Deno.env.get("FEDNODE_SIDECAR_URL");
  if (!url) {
    throw new Error("set FEDNODE_SIDECAR_URL to the sidecar's address (node.sidecar_url)");
  }
  return url;
}

export default (request: Request, context: { next: Next }): Promise<Response> =>
  forward(request, sidecarUrl(), () => context.next());

export const config = { path: ["/api/*", "/library/*", "/"] };
