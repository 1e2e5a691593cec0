# A stand-in for a daemon of an older dbfork: /v1/health without "api".
# scripts/test-install.sh points every client at it and expects the one
# line that says to stop it (pure client logic, so a fake is enough).
import http.server, socketserver, sys, json, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b=json.dumps({"status":"ok","pid":1}).encode()
        self.send_response(200); self.send_header("Content-Length",str(len(b))); self.end_headers(); self.wfile.write(b)
    do_POST=do_GET
    def log_message(self,*a): pass
class S(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    def get_request(self):
        r,_=super().get_request(); return r,("local",0)
p=sys.argv[1]
if os.path.exists(p): os.unlink(p)
S(p,H).serve_forever()
