// SPDX-License-Identifier: Apache-2.0
// Simple dual-port RAM, one write port, one registered read port (read-first
// is irrelevant: the codec never reads and writes the same word in a cycle).
// On an FPGA this maps to block RAM (M20K on Agilex-7); fpga/synth treats it
// as a black box so the generic logic report counts the codec logic only.
`default_nettype none
`ifdef SPECKV_RAM_BLACKBOX
(* blackbox *)
module speckv_sdp_ram #(
  parameter integer W = 512,
  parameter integer D = 64,
  parameter integer AW = 6
) (
  input  wire          clk,
  input  wire          we,
  input  wire [AW-1:0] wa,
  input  wire [W-1:0]  wd,
  input  wire          re,
  input  wire [AW-1:0] ra,
  output wire [W-1:0]  rd
);
endmodule
`else
module speckv_sdp_ram #(
  parameter integer W = 512,
  parameter integer D = 64,
  parameter integer AW = 6
) (
  input  wire          clk,
  input  wire          we,
  input  wire [AW-1:0] wa,
  input  wire [W-1:0]  wd,
  input  wire          re,
  input  wire [AW-1:0] ra,
  output reg  [W-1:0]  rd
);
  reg [W-1:0] mem [0:D-1];
  always @(posedge clk) begin
    if (we) mem[wa] <= wd;
    if (re) rd <= mem[ra];
  end
endmodule
`endif
`default_nettype wire
