import sys,collections,linecache
def load(f):
    d=collections.defaultdict(lambda:[0]*9); fl=None; fn=None; events=None
    for line in open(f):
        if line.startswith('events:'): events=line.split()[1:]
        elif line.startswith('fl='): fl=line[3:].strip()
        elif line.startswith('fn='): fn=line[3:].strip()
        elif line[:1].isdigit():
            p=line.split(); ln=int(p[0]); vals=[int(x) for x in p[1:]]
            a=d[(fl,ln)]
            for i,v in enumerate(vals): a[i]+=v
    return d,events
one,ev=load(sys.argv[1]); two,_=load(sys.argv[2])
N=float(sys.argv[3]); top=int(sys.argv[4]) if len(sys.argv)>4 else 60
idx={e:i for i,e in enumerate(ev)}
rep={}
for k in set(one)|set(two):
    a=one.get(k,[0]*9); b=two.get(k,[0]*9)
    rep[k]=[b[i]-2*a[i] for i in range(len(ev))]
col=idx[sys.argv[5] if len(sys.argv)>5 else 'Ir']
items=sorted(rep.items(),key=lambda kv:-kv[1][col])
print('total', {e: round(sum(v[idx[e]] for v in rep.values())/N,1) for e in ['Ir','D1mr','DLmr']})
for (fl,ln),v in items[:top]:
    src=linecache.getline(fl,ln).strip()[:90]
    print(f"{v[idx['Ir']]/N:7.1f} {v[idx['D1mr']]/N:6.2f} {v[idx['DLmr']]/N:6.2f} {fl.split('/')[-1]}:{ln} {src}")
