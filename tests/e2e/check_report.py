"""Checks of rendered layerdiff reports for tests/e2e/test_report.sh.

  check_report.py junit FILE.xml REPORT.json [--layers]
      well-formed XML (xml.etree), the JUnit shape CI systems read, one test case
      per graph output (per record with --layers), failures == failing cases,
      failure messages carrying metrics
  check_report.py html FILE.html REPORT.json
      the charts (each <svg> is well-formed XML), one table row per record, a
      single script, nothing loaded from the network, tags balanced
  check_report.py png FILE.png
      a screenshot that is not blank: many colours, enough non-white pixels
      (PNG decoded with zlib: no PIL needed)
  check_report.py harness IN.html OUT.html / harness-check DOM.html EXPECTED_JSON
      a copy of a page that clicks its table headers and filters (for chromium
      --dump-dom), and the check of what it saw
  check_report.py hostile IN.json OUT.json
      copies a report, renaming its records to strings built to break out of
      HTML, XML and Markdown (markup, quotes, pipes, backticks, control bytes)

Exits 0 when the check holds, 1 with a message otherwise. Run with Debian's
/usr/bin/python3.
"""
import html.parser
import json
import re
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

HOSTILE = ['<img src=x onerror=alert(1)>', 'a"b\'c&d', 'pipe|name`tick`',
           'ctrl\x01\x1b[31mred', '</script><script>alert(2)</script>', ']]>--><!--']


def fail(msg):
    print('check_report: ' + msg)
    sys.exit(1)


def load(path):
    with open(path, encoding='utf-8') as f:
        return json.load(f)


def xml_safe(name):
    """What the renderers make of a name: control characters become U+FFFD."""
    return ''.join('\ufffd' if (ord(c) < 0x20 and c not in '\t\n\r') or 0x7f <= ord(c) <= 0x9f
                   else c for c in name)


def check_junit(path, report_path, layers):
    report = load(report_path)
    root = ET.parse(path).getroot()
    if root.tag != 'testsuites':
        fail('root is <%s>, not <testsuites>' % root.tag)
    for attr in ('name', 'tests', 'failures', 'errors', 'time'):
        if attr not in root.attrib:
            fail('<testsuites> lacks %s' % attr)
    suites = root.findall('testsuite')
    if len(suites) != 1:
        fail('%d <testsuite> elements' % len(suites))
    suite = suites[0]
    for attr in ('name', 'tests', 'failures', 'errors', 'time', 'timestamp', 'hostname'):
        if attr not in suite.attrib:
            fail('<testsuite> lacks %s' % attr)
    cases = suite.findall('testcase')
    for case in cases:
        for attr in ('name', 'classname', 'time'):
            if attr not in case.attrib:
                fail('<testcase> lacks %s' % attr)
        float(case.attrib['time'])
    records = report['records']
    outputs = [r for r in records if r['is_graph_output']]
    want = records if layers or not outputs else outputs
    missing = report['context']['missing_in_test'] + report['context']['missing_in_reference']
    n_missing = len(missing) if (layers or not outputs) else 0
    if len(cases) != len(want) + n_missing:
        fail('%d test cases, expected %d' % (len(cases), len(want) + n_missing))
    names = [c.attrib['name'] for c in cases]
    for r in want:
        if xml_safe(r['name']) not in names:
            fail('no test case for %r' % r['name'])
    failing = [c for c in cases if c.find('failure') is not None]
    if len(failing) != sum(1 for r in want if not r['pass']):
        fail('%d failures, expected %d' % (len(failing), sum(1 for r in want if not r['pass'])))
    for attr_owner in (root, suite):
        if int(attr_owner.attrib['tests']) != len(cases):
            fail('tests=%s but %d cases' % (attr_owner.attrib['tests'], len(cases)))
        if int(attr_owner.attrib['failures']) != len(failing):
            fail('failures=%s but %d failing' % (attr_owner.attrib['failures'], len(failing)))
    for case in failing:
        f = case.find('failure')
        if 'max abs' not in f.attrib.get('message', '') or not f.attrib.get('type'):
            fail('failure of %r without metrics/type' % case.attrib['name'])
        if 'abs error: max' not in (f.text or ''):
            fail('failure text of %r lacks the metrics' % case.attrib['name'])


class Tags(html.parser.HTMLParser):
    VOID = {'meta', 'input', 'br', 'img', 'link', 'hr'}

    def __init__(self):
        super().__init__()
        self.stack, self.counts, self.errors, self.rows = [], {}, [], 0

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        attrs = dict(attrs)
        for key in ('src', 'href', 'action', 'xlink:href'):
            v = attrs.get(key)
            if v and not v.startswith('#'):
                self.errors.append('external %s=%r' % (key, v))
        if any(k.startswith('on') for k in attrs):
            self.errors.append('event handler attribute in <%s>' % tag)
        if tag == 'tr' and (attrs.get('id') or '').startswith('r'):
            self.rows += 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append('</%s> closes <%s>' % (tag, self.stack[-1] if self.stack else ''))
        else:
            self.stack.pop()


def check_html(path, report_path):
    report = load(report_path)
    with open(path, encoding='utf-8') as f:
        text = f.read()
    p = Tags()
    p.feed(text)
    p.close()
    if p.errors:
        fail('; '.join(p.errors[:5]))
    if p.stack:
        fail('unclosed tags: %s' % p.stack[-5:])
    if p.counts.get('script', 0) != 1:
        fail('%d <script> elements' % p.counts.get('script', 0))
    if p.rows != len(report['records']):
        fail('%d table rows, %d records' % (p.rows, len(report['records'])))
    svgs = re.findall(r'<svg .*?</svg>', text, re.S)
    if len(svgs) < 2:
        fail('%d charts' % len(svgs))
    for s in svgs:
        ET.fromstring(s)  # well-formed
    if 'url(' in text or '@import' in text:
        fail('CSS loads something')


def read_png(path):
    d = open(path, 'rb').read()
    if d[:8] != b'\x89PNG\r\n\x1a\n':
        fail('%s is not a PNG' % path)
    pos, idat = 8, b''
    while pos < len(d):
        n, = struct.unpack('>I', d[pos:pos + 4])
        kind, body = d[pos + 4:pos + 8], d[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b'IHDR':
            w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
            if depth != 8 or ctype not in (2, 6):
                fail('unexpected PNG format depth %d type %d' % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b'IDAT':
            idat += body
    raw, stride = zlib.decompress(idat), w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        ftype, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        if ftype == 1:
            for x in range(bpp, stride):
                line[x] = (line[x] + line[x - bpp]) & 255
        elif ftype == 2:
            for x in range(stride):
                line[x] = (line[x] + prev[x]) & 255
        elif ftype in (3, 4):
            for x in range(stride):
                a = line[x - bpp] if x >= bpp else 0
                b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
                if ftype == 3:
                    line[x] = (line[x] + ((a + b) >> 1)) & 255
                else:
                    pp = a + b - c
                    pa, pb, pc = abs(pp - a), abs(pp - b), abs(pp - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    line[x] = (line[x] + pred) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows


def check_png(path):
    w, h, bpp, rows = read_png(path)
    colours, inked, seen = set(), 0, 0
    for row in rows[::3]:
        for x in range(0, w * bpp, bpp * 3):
            px = row[x:x + 3]
            colours.add(px)
            seen += 1
            inked += px != b'\xff\xff\xff'
    if len(colours) < 16 or inked < seen * 0.02:
        fail('looks blank: %d colours, %d of %d sampled pixels not white'
             % (len(colours), inked, seen))
    print('png: %dx%d, %d colours, %.1f%% inked' % (w, h, len(colours), 100.0 * inked / seen))


HARNESS = """<script>(function(){
var t=document.getElementById('layers'),heads=t.tHead.rows[0].cells,col=-1;
for(var i=0;i<heads.length;i++)if(heads[i].textContent.trim()==='max abs')col=i;
function order(){return [].map.call(t.tBodies[0].rows,function(r){return r.cells[0].textContent;}).join(',');}
heads[col].click();var desc=order();heads[col].click();var asc=order();
var q=document.getElementById('filter');q.value='block1';q.dispatchEvent(new Event('input'));
var filtered=document.getElementById('shown').textContent;
q.value='';q.dispatchEvent(new Event('input'));document.getElementById('only-fail').click();
var failing=document.getElementById('shown').textContent;
var out=document.createElement('pre');out.id='harness';
out.textContent=JSON.stringify({desc:desc,asc:asc,filtered:filtered,failing:failing});
document.body.appendChild(out);})();</script>"""


def make_harness(src, dst):
    """A copy of an HTML report whose extra script clicks the table's headers and
    filters, writing what it saw into <pre id="harness"> (for chromium --dump-dom).
    The CSP is dropped in the copy: it would (rightly) block the extra script."""
    with open(src, encoding='utf-8') as f:
        text = f.read()
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', '', text)
    text = text.replace('</body>', HARNESS + '</body>')
    with open(dst, 'w', encoding='utf-8') as f:
        f.write(text)


def check_harness(dom_path, expected_json):
    with open(dom_path, encoding='utf-8') as f:
        dom = f.read()
    m = re.search(r'<pre id="harness">(.*?)</pre>', dom, re.S)
    if not m:
        fail('the page script did not run (no harness output)')
    import html as h
    got = json.loads(h.unescape(m.group(1)))
    want = json.loads(expected_json)
    for k, v in want.items():
        if got.get(k) != v:
            fail('%s: got %r, expected %r' % (k, got.get(k), v))


def make_hostile(src, dst):
    report = load(src)
    for i, r in enumerate(report['records']):
        r['name'] = HOSTILE[i % len(HOSTILE)] + str(i)
        r['op_type'] = HOSTILE[(i + 1) % len(HOSTILE)]
    report['context']['model_path'] = '/m/<b>bold</b>|x.onnx'
    with open(dst, 'w', encoding='utf-8') as f:
        json.dump(report, f)


def main():
    what = sys.argv[1]
    if what == 'junit':
        check_junit(sys.argv[2], sys.argv[3], '--layers' in sys.argv[4:])
    elif what == 'html':
        check_html(sys.argv[2], sys.argv[3])
    elif what == 'png':
        check_png(sys.argv[2])
    elif what == 'harness':
        make_harness(sys.argv[2], sys.argv[3])
    elif what == 'harness-check':
        check_harness(sys.argv[2], sys.argv[3])
    elif what == 'hostile':
        make_hostile(sys.argv[2], sys.argv[3])
    else:
        fail('unknown check %r' % what)


if __name__ == '__main__':
    main()
