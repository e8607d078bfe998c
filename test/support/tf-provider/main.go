// A provider for Cairn's tests: one resource, cairntest_note, whose text is kept in state. It
// exists so a test installs a provider from a filesystem mirror, with no registry reached.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

type cairnProvider struct{}

func (p *cairnProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "cairntest"
}

func (p *cairnProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {}

func (p *cairnProvider) Configure(_ context.Context, _ provider.ConfigureRequest, _ *provider.ConfigureResponse) {}

func (p *cairnProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{func() resource.Resource { return &note{} }}
}

func (p *cairnProvider) DataSources(_ context.Context) []func() datasource.DataSource { return nil }

type note struct{}

type noteModel struct {
	ID   types.String `tfsdk:"id"`
	Text types.String `tfsdk:"text"`
}

func (r *note) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_note"
}

func (r *note) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id":   schema.StringAttribute{Computed: true},
		"text": schema.StringAttribute{Required: true},
	}}
}

func (r *note) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m noteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = types.StringValue("note-" + m.Text.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *note) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var m noteModel
	resp.Diagnostics.Append(req.State.Get(ctx, &m)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *note) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var m noteModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = types.StringValue("note-" + m.Text.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *note) Delete(_ context.Context, _ resource.DeleteRequest, _ *resource.DeleteResponse) {}

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return &cairnProvider{} }, providerserver.ServeOpts{Address: "registry.opentofu.org/cairn/cairntest"})
	if err != nil {
		log.Fatal(err)
	}
}
