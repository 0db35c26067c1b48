/* layerdiff — ld_graph_finalize: producers, topological order, consumers and
 * name indexes (see include/layerdiff/graph.h).
 *
 * The sort is Kahn's algorithm with a min-heap of ready nodes keyed by their
 * position in the file, so among all valid orders it picks the one closest
 * to the file's: a graph that is already sorted keeps its order exactly.
 * Everything is iterative; a 100,000-node chain needs no deep stack. */
#include "layerdiff/graph.h"

#include <stdlib.h>
#include <string.h>

#include "core/strmap.h"

/* Binary min-heap of node indices. */
typedef struct node_heap {
    int *items;
    int size;
} node_heap;

static void heap_push(node_heap *h, int node)
{
    int i = h->size++;
    while (i > 0) {
        int parent = (i - 1) / 2;
        if (h->items[parent] <= node)
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = node;
}

static int heap_pop(node_heap *h)
{
    int top = h->items[0];
    int last = h->items[--h->size];
    int i = 0;
    for (;;) {
        int child = 2 * i + 1;
        if (child >= h->size)
            break;
        if (child + 1 < h->size && h->items[child + 1] < h->items[child])
            child++;
        if (last <= h->items[child])
            break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->size > 0)
        h->items[i] = last;
    return top;
}

/* The value indices a node reads are its inputs followed by its implicit
 * (subgraph) inputs; both order the node after their producers. */
static int node_read_count(const ld_node *node)
{
    return node->n_inputs + node->n_implicit_inputs;
}

static int node_read(const ld_node *node, int k)
{
    return k < node->n_inputs ? node->inputs[k] : node->implicit_inputs[k - node->n_inputs];
}

static ld_status build_value_index(ld_graph *g, ld_error *err)
{
    ld_strmap *map = NULL;
    ld_status st = ld_strmap_create(&map, (size_t)g->n_values, err);
    if (st != LD_OK)
        return st;
    for (int v = 0; v < g->n_values; v++) {
        const char *name = g->values[v].name;
        if (!name) {
            st = ld_error_set(err, LD_ERR_INTERNAL, "value #%d has no name", v);
            goto out;
        }
        if (ld_strmap_get(map, name) >= 0) {
            st = ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s'", name);
            goto out;
        }
        st = ld_strmap_put(map, name, v, err);
        if (st != LD_OK)
            goto out;
    }
    ld_strmap_destroy(g->name_index);
    g->name_index = map;
    map = NULL;
out:
    ld_strmap_destroy(map);
    return st;
}

static ld_status check_indices_and_set_producers(ld_graph *g, ld_error *err)
{
    for (int v = 0; v < g->n_values; v++)
        g->values[v].producer = -1;
    for (int n = 0; n < g->n_nodes; n++) {
        const ld_node *node = &g->nodes[n];
        for (int k = 0; k < node_read_count(node); k++) {
            int v = node_read(node, k);
            if (v < -1 || v >= g->n_values)
                return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': input value index %d "
                                    "out of range", node->name, v);
        }
        for (int k = 0; k < node->n_outputs; k++) {
            int v = node->outputs[k];
            if (v < -1 || v >= g->n_values)
                return ld_error_set(err, LD_ERR_INTERNAL, "node '%s': output value index %d "
                                    "out of range", node->name, v);
            if (v < 0)
                continue;
            ld_value *value = &g->values[v];
            if (value->producer >= 0)
                return ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s': produced "
                                    "by node '%s' and by node '%s'", value->name,
                                    g->nodes[value->producer].name, node->name);
            if (value->kind != LD_VALUE_NODE_OUTPUT)
                return ld_error_set(err, LD_ERR_INPUT, "duplicate tensor name '%s': output of "
                                    "node '%s' is also a graph %s", value->name, node->name,
                                    ld_value_kind_name(value->kind));
            value->producer = n;
        }
    }
    return LD_OK;
}

/* Called when the sort could not place every node: walks backwards from an
 * unplaced node through unplaced producers until a node repeats. Every
 * unplaced node has an unplaced producer, so the walk must close a loop, and
 * the repeated node lies on a cycle. */
static ld_status report_cycle(const ld_graph *g, const int *placed, ld_error *err)
{
    ld_status st;
    char *visited = calloc((size_t)g->n_nodes, 1);
    if (!visited)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory reporting a cycle");
    int cur = 0;
    while (placed[cur])
        cur++;
    for (;;) {
        visited[cur] = 1;
        const ld_node *node = &g->nodes[cur];
        int next = -1, via = -1;
        for (int k = 0; k < node_read_count(node) && next < 0; k++) {
            int v = node_read(node, k);
            if (v >= 0 && g->values[v].producer >= 0 && !placed[g->values[v].producer]) {
                next = g->values[v].producer;
                via = v;
            }
        }
        if (next < 0) { /* cannot happen: keep the message honest anyway */
            st = ld_error_set(err, LD_ERR_INTERNAL, "topological sort stalled at node '%s'",
                              node->name);
            goto out;
        }
        if (visited[next]) {
            st = ld_error_set(err, LD_ERR_INPUT, "graph has a cycle through node '%s' (%s): "
                              "its output '%s' feeds back into its own inputs",
                              g->nodes[next].name, g->nodes[next].op_type, g->values[via].name);
            goto out;
        }
        cur = next;
    }
out:
    free(visited);
    return st;
}

/* Fills order[] with a stable topological order. */
static ld_status sort_nodes(const ld_graph *g, int *order, ld_error *err)
{
    ld_status st = LD_OK;
    size_t nv = (size_t)g->n_values, nn = (size_t)g->n_nodes;
    int *edge_start = calloc(nv + 1, sizeof *edge_start); /* CSR: value -> reader nodes */
    int *indegree = calloc(nn ? nn : 1, sizeof *indegree);
    int *placed = calloc(nn ? nn : 1, sizeof *placed);
    int *edges = NULL, *fill = NULL;
    node_heap heap = {calloc(nn ? nn : 1, sizeof(int)), 0};
    size_t n_edges = 0;
    if (!edge_start || !indegree || !placed || !heap.items)
        goto nomem;

    for (int n = 0; n < g->n_nodes; n++) {
        const ld_node *node = &g->nodes[n];
        for (int k = 0; k < node_read_count(node); k++) {
            int v = node_read(node, k);
            if (v >= 0 && g->values[v].producer >= 0) {
                edge_start[v + 1]++;
                indegree[n]++;
                n_edges++;
            }
        }
    }
    for (size_t v = 0; v < nv; v++)
        edge_start[v + 1] += edge_start[v];
    edges = malloc((n_edges ? n_edges : 1) * sizeof *edges);
    fill = malloc((nv ? nv : 1) * sizeof *fill);
    if (!edges || !fill)
        goto nomem;
    memcpy(fill, edge_start, nv * sizeof *fill);
    for (int n = 0; n < g->n_nodes; n++) {
        const ld_node *node = &g->nodes[n];
        for (int k = 0; k < node_read_count(node); k++) {
            int v = node_read(node, k);
            if (v >= 0 && g->values[v].producer >= 0)
                edges[fill[v]++] = n;
        }
    }

    for (int n = 0; n < g->n_nodes; n++)
        if (indegree[n] == 0)
            heap_push(&heap, n);
    int emitted = 0;
    while (heap.size > 0) {
        int n = heap_pop(&heap);
        order[emitted++] = n;
        placed[n] = 1;
        const ld_node *node = &g->nodes[n];
        for (int k = 0; k < node->n_outputs; k++) {
            int v = node->outputs[k];
            for (int e = v < 0 ? 0 : edge_start[v]; v >= 0 && e < edge_start[v + 1]; e++)
                if (--indegree[edges[e]] == 0)
                    heap_push(&heap, edges[e]);
        }
    }
    if (emitted < g->n_nodes)
        st = report_cycle(g, placed, err);
    goto out;
nomem:
    st = ld_error_set(err, LD_ERR_NOMEM, "out of memory sorting %d nodes", g->n_nodes);
out:
    free(edge_start);
    free(indegree);
    free(placed);
    free(edges);
    free(fill);
    free(heap.items);
    return st;
}

static ld_status apply_order(ld_graph *g, const int *order, ld_error *err)
{
    if (g->n_nodes == 0)
        return LD_OK;
    ld_node *sorted = malloc((size_t)g->n_nodes * sizeof *sorted);
    if (!sorted)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory sorting %d nodes", g->n_nodes);
    for (int k = 0; k < g->n_nodes; k++) {
        sorted[k] = g->nodes[order[k]];
        sorted[k].index = k;
        for (int o = 0; o < sorted[k].n_outputs; o++)
            if (sorted[k].outputs[o] >= 0)
                g->values[sorted[k].outputs[o]].producer = k;
    }
    free(g->nodes);
    g->nodes = sorted;
    return LD_OK;
}

/* consumers[] in topological order; a node reading a value twice (or also
 * through a subgraph) is listed once. Two passes: count, then fill. */
static ld_status fill_consumers(ld_graph *g, ld_error *err)
{
    ld_status st = LD_OK;
    int *last = malloc(((size_t)g->n_values ? (size_t)g->n_values : 1) * sizeof *last);
    if (!last)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory listing consumers");
    for (int pass = 0; pass < 2; pass++) {
        for (int v = 0; v < g->n_values; v++) {
            last[v] = -1;
            if (pass == 0) {
                free(g->values[v].consumers);
                g->values[v].consumers = NULL;
                g->values[v].n_consumers = 0;
            } else if (g->values[v].n_consumers > 0) {
                g->values[v].consumers = malloc((size_t)g->values[v].n_consumers * sizeof(int));
                if (!g->values[v].consumers) {
                    st = ld_error_set(err, LD_ERR_NOMEM, "out of memory listing consumers");
                    goto out;
                }
                g->values[v].n_consumers = 0;
            }
        }
        for (int n = 0; n < g->n_nodes; n++) {
            const ld_node *node = &g->nodes[n];
            for (int k = 0; k < node_read_count(node); k++) {
                int v = node_read(node, k);
                if (v < 0 || last[v] == n)
                    continue;
                last[v] = n;
                ld_value *value = &g->values[v];
                if (pass == 1)
                    value->consumers[value->n_consumers] = n;
                value->n_consumers++;
            }
        }
    }
out:
    free(last);
    return st;
}

static ld_status build_node_index(ld_graph *g, ld_error *err)
{
    ld_strmap *map = NULL;
    ld_status st = ld_strmap_create(&map, (size_t)g->n_nodes, err);
    if (st != LD_OK)
        return st;
    for (int n = 0; n < g->n_nodes; n++) {
        /* Duplicate node names are legal ONNX; the first in order wins. */
        if (g->nodes[n].name && ld_strmap_get(map, g->nodes[n].name) < 0) {
            st = ld_strmap_put(map, g->nodes[n].name, n, err);
            if (st != LD_OK)
                goto out;
        }
    }
    ld_strmap_destroy(g->node_index);
    g->node_index = map;
    map = NULL;
out:
    ld_strmap_destroy(map);
    return st;
}

ld_status ld_graph_finalize(ld_graph *g, ld_error *err)
{
    int *order = malloc(((size_t)g->n_nodes ? (size_t)g->n_nodes : 1) * sizeof *order);
    if (!order)
        return ld_error_set(err, LD_ERR_NOMEM, "out of memory sorting %d nodes", g->n_nodes);
    ld_status st = build_value_index(g, err);
    if (st == LD_OK)
        st = check_indices_and_set_producers(g, err);
    if (st == LD_OK)
        st = sort_nodes(g, order, err);
    if (st == LD_OK)
        st = apply_order(g, order, err);
    if (st == LD_OK)
        st = fill_consumers(g, err);
    if (st == LD_OK)
        st = build_node_index(g, err);
    free(order);
    return st;
}
